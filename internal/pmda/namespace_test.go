package pmda

import (
	"fmt"
	"testing"

	"perfevent/internal/pdu"
)

// A node finds its children by name whether it has a few, which it looks
// through, or more than indexFrom, which it indexes; names are refused
// twice either way, and listed in the order given.
func TestNamespaceManyChildren(t *testing.T) {
	for _, n := range []int{1, indexFrom, indexFrom + 1, 3 * indexFrom} {
		spec := TableSpec{Domain: 9, Subtrees: []string{"a.sub"}}
		for i := range n {
			spec.Metrics = append(spec.Metrics,
				Metric{Name: fmt.Sprintf("a.m%d.value", i), Desc: pdu.Desc{PMID: pdu.NewPMID(9, i+1, 0), Type: pdu.ValueUint64, InDom: pdu.InDomNull}},
				Metric{Name: fmt.Sprintf("a.m%d.duty", i), Desc: pdu.Desc{PMID: pdu.NewPMID(9, i+1, 1), Type: pdu.ValueDouble, InDom: pdu.InDomNull}})
		}
		table, err := NewTable(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			for item, leaf := range []string{"value", "duty"} {
				name := fmt.Sprintf("a.m%d.%s", i, leaf)
				if id, err := table.PMID(name); err != nil || id != pdu.NewPMID(9, i+1, item) {
					t.Errorf("%d children: PMID(%s) = %v %v", n, name, id, err)
				}
			}
		}
		if _, err := table.PMID(fmt.Sprintf("a.m%d.value", n)); err == nil {
			t.Errorf("%d children: a name not in the table has a PMID", n)
		}
		kids, err := table.Children("a", nil)
		if err != nil || len(kids) != n+1 || kids[0] != (Child{Name: "sub"}) || kids[n] != (Child{Name: fmt.Sprintf("m%d", n-1)}) {
			t.Errorf("%d children: Children(a) = %v %v", n, kids, err)
		}
		spec.Metrics = append(spec.Metrics, Metric{Name: fmt.Sprintf("a.m%d.value", n-1), Desc: pdu.Desc{PMID: pdu.NewPMID(9, 999, 0), Type: pdu.ValueUint64, InDom: pdu.InDomNull}})
		if _, err := NewTable(spec); err == nil {
			t.Errorf("%d children: a name defined twice was accepted", n)
		}
	}
}

// A PMID with several names (aliases, one descriptor) lists them all, in
// the order given, and its neighbours keep theirs.
func TestNamesOfAliases(t *testing.T) {
	d := func(item int) pdu.Desc {
		return pdu.Desc{PMID: pdu.NewPMID(9, 1, item), Type: pdu.ValueUint64, InDom: pdu.InDomNull}
	}
	table, err := NewTable(TableSpec{Domain: 9, Metrics: []Metric{
		{Name: "a.one", Desc: d(0)}, {Name: "a.two", Desc: d(1)}, {Name: "b.one", Desc: d(0)}, {Name: "c.one", Desc: d(0)}, {Name: "a.three", Desc: d(2)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for item, want := range [][]string{{"a.one", "b.one", "c.one"}, {"a.two"}, {"a.three"}} {
		if got, err := table.Names(pdu.NewPMID(9, 1, item)); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Names(9.1.%d) = %v %v, want %v", item, got, err, want)
		}
	}
}
