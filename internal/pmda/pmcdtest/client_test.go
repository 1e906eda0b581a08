package pmcdtest_test

import (
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"perfevent/internal/emulator"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/pmda/pmcdtest"
)

const dom = 251

// typed serves one metric of every numeric type, and a string.
type typed struct{}

func (typed) Prepare(*pmda.FetchRequest) error { return nil }

func (typed) Values(m *pmda.Metric, w *pmda.ValueWriter) error {
	switch m.Desc.Type {
	case pdu.ValueInt32:
		w.Int32(0, -5)
		w.Int32(1, 7)
	case pdu.ValueUint32:
		w.Uint32(pdu.InNull, 4000000000)
	case pdu.ValueInt64:
		w.Int64(pdu.InNull, -1<<40)
	case pdu.ValueUint64:
		w.Uint64(pdu.InNull, 1<<60)
	case pdu.ValueFloat:
		w.Float(pdu.InNull, 0.25)
	case pdu.ValueDouble:
		w.Double(pdu.InNull, 2.5)
	case pdu.ValueString:
		w.String(pdu.InNull, "text")
	}
	return nil
}

func connect(t *testing.T) *pmcdtest.Client {
	t.Helper()
	indom := pdu.NewInDom(dom, 0)
	spec := pmda.TableSpec{Domain: dom,
		InDoms: []pmda.InDom{{InDom: indom, Instances: []pmda.Instance{{ID: 0, Name: "a"}, {ID: 1, Name: "b"}}}}}
	for i, typ := range []pdu.ValueType{pdu.ValueInt32, pdu.ValueUint32, pdu.ValueInt64, pdu.ValueUint64, pdu.ValueFloat, pdu.ValueDouble, pdu.ValueString} {
		d := pdu.Desc{PMID: pdu.NewPMID(dom, 0, i), Type: typ, InDom: pdu.InDomNull, Sem: pdu.SemInstant}
		if typ == pdu.ValueInt32 {
			d.InDom = indom
		}
		spec.Metrics = append(spec.Metrics, pmda.Metric{Name: "t." + strings.ToLower(typ.String()), Desc: d})
	}
	tab, err := pmda.NewTable(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pmcdtest.Connect(pmda.New(pmda.Config{Fetcher: typed{}}, tab).Serve)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFetchDecodesEveryType(t *testing.T) {
	c := connect(t)
	var ids []pdu.PMID
	for _, name := range []string{"t.32", "t.u32", "t.64", "t.u64", "t.float", "t.double", "t.string"} {
		id, err := c.PMID(name)
		if err != nil {
			t.Fatalf("PMID(%s): %v", name, err)
		}
		ids = append(ids, id)
	}
	r, err := c.Fetch(ids...)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Sets[0].Map(); len(got) != 2 || got[0] != -5 || got[1] != 7 {
		t.Errorf("32-bit values %v, want 0:-5 1:7", got)
	}
	if got := r.Sets[0].Insts(); !slices.Equal(got, []int32{0, 1}) {
		t.Errorf("instances %v", got)
	}
	// In situ, a 32-bit value's sign is the descriptor's business.
	if v := r.Sets[1].Values[0]; v.Insitu != 4000000000 || v.Float64() != -294967296 {
		t.Errorf("unsigned 32-bit value %d, as Float64 %v", v.Insitu, v.Float64())
	}
	for i, want := range []float64{-1 << 40, 1 << 60, 0.25, 2.5} {
		s := r.Sets[i+2]
		if s.Err() != nil || len(s.Values) != 1 || s.Values[0].Inst != pdu.InNull || s.Values[0].Float64() != want {
			t.Errorf("%s: %+v, want %v", s.PMID, s, want)
		}
	}
	if v := r.Sets[6].Values[0]; v.String() != "text" || !math.IsNaN(v.Float64()) {
		t.Errorf("string value %q (%v)", v.String(), v.Float64())
	}
	r, err = c.Fetch(pdu.NewPMID(dom, 9, 9))
	if err != nil || r.Sets[0].Err() != pdu.ErrPMID {
		t.Errorf("unknown PMID: %+v %v", r, err)
	}
	if _, err := c.PMID("t.nope"); err != pdu.ErrName {
		t.Errorf("unknown name: %v, want PM_ERR_NAME itself", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v, want Serve's nil at the end of the stream", err)
	}
}

// An agent that never answers costs the timeout, not the test.
func TestTimeout(t *testing.T) {
	var b pdu.Builder
	c, err := pmcdtest.Connect(func(conn io.ReadWriter) error {
		conn.Write(b.Creds(1, pdu.VersionCred(0)))
		io.Copy(io.Discard, conn)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetTimeout(50 * time.Millisecond)
	start := time.Now()
	if _, err := c.Desc(pdu.NewPMID(dom, 0, 0)); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("Desc of a silent agent: %v after %v", err, time.Since(start))
	}
}

// StartCommand and Close drive a built agent as pmcd does.
func TestStartCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "exampleagent")
	if out, err := exec.Command("go", "build", "-o", bin, "../internal/exampleagent").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := emulator.Wrap(bin); err != nil {
		t.Fatal(err)
	}
	c, err := pmcdtest.StartCommand(exec.Command(bin, "-l", filepath.Join(t.TempDir(), "log")))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.PMID("example.dyn.counter.value")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Fetch(id)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Sets[0].Map(); len(got) != 2 || got[0] != 5 || got[1] != 7 {
		t.Errorf("values %v, want 0:5 1:7", got)
	}
	list, err := c.Instance(pdu.NewInDom(250, 0), pdu.InNull, "")
	if err != nil || len(list) != 2 || string(list[1].Name) != "cpu1" {
		t.Errorf("instances %+v %v", list, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("the agent's exit: %v", err)
	}
}
