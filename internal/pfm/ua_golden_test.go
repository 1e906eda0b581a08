package pfm

// Temporary harness: compares the uncore, RAPL and AMD64 encoders with
// libpfm4's answers, on tables and goldens given by PFM_UA_CATALOG
// (JSON []PMU) and PFM_UA_GOLDEN (a directory of <pmu>.tsv). It goes
// when the generated catalog and the shared differential test land.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func uaSplit(name string) (string, string, []string) {
	pmu, rest, ok := strings.Cut(name, "::")
	if !ok {
		pmu, rest = "", name
	}
	i := strings.IndexAny(rest, ":.")
	if i < 0 {
		return pmu, rest, nil
	}
	return pmu, rest[:i], strings.FieldsFunc(rest[i+1:]+"\x00", func(c rune) bool { return c == ':' || c == '.' })
}

func uaEncode(pmus map[string]*PMU, types map[string]uint32, name string) (Encoding, error) {
	pname, ename, _ := strings.Cut(name, "::")
	p := pmus[pname]
	if p == nil {
		return Encoding{}, &famError{Code: ErrNotFound}
	}
	en, attrs, found := ename, []string(nil), false
	if i := strings.IndexAny(ename, ":."); i >= 0 {
		en = ename[:i]
		s := ename[i+1:]
		for {
			j := strings.IndexAny(s, ":.")
			if j < 0 {
				attrs = append(attrs, s)
				break
			}
			attrs = append(attrs, s[:j])
			s = s[j+1:]
		}
	}
	var ev *Event
	for i := range p.Events {
		e := &p.Events[i]
		if p.Family == FamilyAMD64 && !AMD64EventValid(p, e) {
			continue
		}
		if p.Family != FamilyAMD64 && e.Model != 0 && int(e.Model) != p.ID {
			continue
		}
		if strings.EqualFold(e.Name, en) {
			ev, found = e, true
			break
		}
	}
	if !found {
		return Encoding{}, &famError{Code: ErrNotFound}
	}
	if ev.Equiv != "" {
		_, target, pre := uaSplit(ev.Equiv)
		for i := range p.Events {
			if strings.EqualFold(p.Events[i].Name, target) {
				ev = &p.Events[i]
			}
		}
		attrs = append(pre, attrs...)
	}
	r := &request{pmu: p, event: ev, attrs: attrs, plm: PLM0 | PLM3, env: Env{PerfType: func(n string) (uint32, error) {
		t, ok := types[n]
		if !ok {
			return 0, fmt.Errorf("no such PMU")
		}
		return t, nil
	}}}
	if err := familyEncoders[p.Family](r); err != nil {
		return Encoding{}, err
	}
	return Encoding{PMU: p, Event: ev, Attr: r.attr, FullName: r.fstr}, nil
}

func excludeString(a unix.PerfEventAttr) string {
	s := ""
	for _, x := range []struct {
		bit uint64
		c   string
	}{{unix.PerfBitExcludeUser, "u"}, {unix.PerfBitExcludeKernel, "k"}, {unix.PerfBitExcludeHv, "h"}, {unix.PerfBitExcludeIdle, "i"}, {unix.PerfBitExcludeHost, "H"}, {unix.PerfBitExcludeGuest, "G"}} {
		if a.Bits&x.bit != 0 {
			s += x.c
		}
	}
	if s == "" {
		return "-"
	}
	return s
}

func TestUAGolden(t *testing.T) {
	catPath, goldDir := os.Getenv("PFM_UA_CATALOG"), os.Getenv("PFM_UA_GOLDEN")
	if catPath == "" || goldDir == "" {
		t.Skip("needs PFM_UA_CATALOG and PFM_UA_GOLDEN")
	}
	data, err := os.ReadFile(catPath)
	if err != nil {
		t.Fatal(err)
	}
	var list []*PMU
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	pmus := map[string]*PMU{}
	names := map[string]bool{}
	for _, p := range list {
		pmus[p.Name] = p
		if p.PerfName != "" {
			names[p.PerfName] = true
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	types := map[string]uint32{}
	for i, n := range sorted {
		types[n] = uint32(100 + i)
	}
	files, _ := filepath.Glob(filepath.Join(goldDir, "*.tsv"))
	total, bad := 0, 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		n, nbad := 0, 0
		for sc.Scan() {
			fields := strings.Split(sc.Text(), "\t")
			name := fields[0]
			n++
			enc, err := uaEncode(pmus, types, name)
			var got string
			if err != nil {
				fe, ok := err.(*famError)
				if !ok {
					t.Fatalf("%s: %v", name, err)
				}
				got = "ERR\t" + fe.Code.String()
			} else {
				a := enc.Attr
				got = fmt.Sprintf("OK\t%d\t%#x\t%#x\t%#x\t%s\t%s\t%s", a.Type, a.Config, a.Ext1, a.Ext2, excludeString(a), enc.PMU.Name, enc.FullName)
				got = strings.ReplaceAll(got, "\t0x0\t", "\t0\t")
				got = strings.ReplaceAll(got, "\t0x0\t", "\t0\t")
			}
			if len(fields) > 7 && fields[7] == "?" {
				fields[7] = enc.PMU.Name // the oracle names only the PMU it was forced to
			}
			want := strings.Join(fields[1:], "\t")
			if got != want {
				nbad++
				if nbad <= 12 {
					t.Errorf("%s:\n got %s\nwant %s (%v)", name, got, want, err)
				}
			}
		}
		fh.Close()
		total += n
		bad += nbad
		t.Logf("%-28s %6d names %5d differ", strings.TrimSuffix(filepath.Base(f), ".tsv"), n, nbad)
	}
	t.Logf("total %d names, %d differ", total, bad)
	_ = strconv.Itoa
}
