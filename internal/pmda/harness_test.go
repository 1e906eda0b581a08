package pmda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"perfevent/internal/pdu"
	"perfevent/internal/pmda/pmcdtest"
	"perfevent/internal/testlog"
)

const dom = 127

var (
	pmidVersion  = pdu.NewPMID(dom, 0, 0)
	pmidActive   = pdu.NewPMID(dom, 0, 1)
	pmidCounter  = pdu.NewPMID(dom, 2, 0)
	pmidDuty     = pdu.NewPMID(dom, 2, 1)
	pmidBytes    = pdu.NewPMID(dom, 3, 0)
	pmidBroken   = pdu.NewPMID(dom, 3, 1)
	indomCPU     = pdu.NewInDom(dom, 2)
	pmidUnknown  = pdu.NewPMID(dom, 9, 9)
	indomUnknown = pdu.NewInDom(dom, 99)
)

func exampleSpec() TableSpec {
	cpus := []Instance{
		{ID: 0, Name: "cpu0", Labels: Labels{"cpu": 0}},
		{ID: 1, Name: "cpu1", Labels: Labels{"cpu": 1}},
		{ID: 3, Name: "cpu3 spare", Labels: Labels{"cpu": 3}},
	}
	return TableSpec{
		Domain: dom,
		Metrics: []Metric{
			{Name: "example.version", Desc: pdu.Desc{PMID: pmidVersion, Type: pdu.ValueString, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete},
				OneLine: "Agent version", Help: "The version of the example agent."},
			{Name: "example.active", Desc: pdu.Desc{PMID: pmidActive, Type: pdu.ValueInt32, InDom: pdu.InDomNull, Sem: pdu.SemInstant}},
			{Name: "example.dyn.counter.value", Desc: pdu.Desc{PMID: pmidCounter, Type: pdu.ValueUint64, InDom: indomCPU, Sem: pdu.SemCounter, Units: pdu.UnitsCount},
				OneLine: "The values of the counter", Labels: Labels{"units": "events"}},
			{Name: "example.dyn.counter.dutycycle", Desc: pdu.Desc{PMID: pmidDuty, Type: pdu.ValueDouble, InDom: indomCPU, Sem: pdu.SemInstant}},
			{Name: "example.dyn.bytes", Desc: pdu.Desc{PMID: pmidBytes, Type: pdu.ValueInt64, InDom: pdu.InDomNull, Sem: pdu.SemCounter}},
			{Name: "example.dyn.broken", Desc: pdu.Desc{PMID: pmidBroken, Type: pdu.ValueInt64, InDom: pdu.InDomNull, Sem: pdu.SemCounter}},
		},
		InDoms: []InDom{{InDom: indomCPU, Instances: cpus, OneLine: "per cpu",
			Labels: Labels{"device_type": "cpu", "indom_name": "per cpu"}}},
		DomainLabels:  Labels{"agent": "example"},
		ClusterLabels: map[int]Labels{2: {"cluster": "counters"}},
		Subtrees:      []string{"example.dyn", "example.derived"},
	}
}

// exampleFetcher serves the example table and records what it was asked.
type exampleFetcher struct {
	mu       sync.Mutex
	prepared [][]pdu.PMID
	values   int
	failAll  error
	quiet    bool // record nothing, so as not to allocate
}

func (f *exampleFetcher) Prepare(req *FetchRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.quiet {
		f.prepared = append(f.prepared, append([]pdu.PMID(nil), req.PMIDs...))
	}
	return f.failAll
}

func (f *exampleFetcher) Values(m *Metric, w *ValueWriter) error {
	f.mu.Lock()
	f.values++
	f.mu.Unlock()
	switch m.Desc.PMID {
	case pmidVersion:
		w.String(pdu.InNull, "1.0.1")
	case pmidActive:
		w.Int32(pdu.InNull, 24)
	case pmidCounter:
		for _, i := range []int32{0, 1, 3} {
			w.Uint64(i, uint64(1000+i))
		}
	case pmidDuty:
		w.Double(0, 0.5)
		w.Double(1, 1.0)
	case pmidBytes:
		return pdu.ErrAgain
	case pmidBroken:
		w.Double(pdu.InNull, 1) // wrong type on purpose
	}
	return nil
}

// harness is a fake pmcd (pmcdtest) on an in-process agent, failing the
// test on whatever a request meets that it did not expect.
type harness struct {
	*pmcdtest.Client
	b     pdu.Builder // for requests built by hand
	t     *testing.T
	agent *Agent
	log   *testlog.Buffer
}

func startAgent(t *testing.T, f Fetcher, spec TableSpec, cfg Config) *harness {
	t.Helper()
	tab, err := NewTable(spec)
	if err != nil {
		t.Fatal(err)
	}
	logbuf := &testlog.Buffer{}
	lg := NewLogger(logbuf, "pmdaexample")
	cfg.Fetcher, cfg.Log = f, lg
	a := New(cfg, tab)
	c, err := pmcdtest.Connect(a.Serve)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if creds := c.AgentCreds(); len(creds) != 1 || creds[0] != pdu.VersionCred(cfg.CredFlags) {
		t.Fatalf("agent CREDS = %+v", creds)
	}
	return &harness{Client: c, t: t, agent: a, log: logbuf}
}

func (h *harness) send(msg []byte) {
	h.t.Helper()
	if err := h.Send(msg); err != nil {
		h.t.Fatal(err)
	}
}

// ask sends a request and returns the reply, which must be of type want.
func (h *harness) ask(req []byte, want pdu.Type) *pdu.Parser {
	h.t.Helper()
	p, err := h.Ask(append([]byte(nil), req...), want)
	if err != nil {
		h.t.Fatalf("%s reply: %v", want, err)
	}
	return p
}

func (h *harness) askErr(req []byte, want pdu.Err) {
	h.t.Helper()
	code, err := h.ask(req, pdu.TypeError).Error()
	if err != nil || code != want {
		h.t.Fatalf("error reply = %v (%d), %v; want %v (%d)", code, int32(code), err, want, int32(want))
	}
}

// wantErr checks that err is the agent's ERROR reply want.
func wantErr(t *testing.T, err error, want pdu.Err) {
	t.Helper()
	if code, ok := err.(pdu.Err); !ok || code != want {
		t.Fatalf("error reply = %v; want %v (%d)", err, want, int32(want))
	}
}

func (h *harness) fetch(from int32, pmids ...pdu.PMID) *pmcdtest.Result {
	h.t.Helper()
	r, err := h.Slot(from).Fetch(pmids...)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func TestDescAndFetch(t *testing.T) {
	f := &exampleFetcher{}
	h := startAgent(t, f, exampleSpec(), Config{})

	d, err := h.Desc(pmidCounter)
	if err != nil || d != (pdu.Desc{PMID: pmidCounter, Type: pdu.ValueUint64, InDom: indomCPU, Sem: pdu.SemCounter, Units: pdu.UnitsCount}) {
		t.Fatalf("Desc = %+v %v", d, err)
	}
	_, err = h.Desc(pmidUnknown)
	wantErr(t, err, pdu.ErrPMID)

	r := h.fetch(0, pmidVersion, pmidActive, pmidCounter, pmidDuty, pmidBytes, pmidUnknown, pmidBroken, pmidCounter)
	if r.Flags != 0 {
		t.Errorf("flags = %#x", r.Flags)
	}
	if s := r.Sets[0]; s.NumVal != 1 || string(s.Values[0].Block) != "1.0.1\x00" || s.Values[0].Inst != pdu.InNull {
		t.Errorf("version = %+v", s)
	}
	if s := r.Sets[1]; s.NumVal != 1 || s.ValFmt != pdu.ValInsitu || s.Values[0].Insitu != 24 {
		t.Errorf("active = %+v", s)
	}
	if s := r.Sets[2]; s.NumVal != 3 || s.Values[2].Inst != 3 || s.Values[2].VType != pdu.ValueUint64 {
		t.Errorf("counter = %+v", s)
	} else if v, _ := s.Values[2].Uint64(); v != 1003 {
		t.Errorf("counter[3] = %d", v)
	}
	if r.Sets[3].NumVal != 2 || r.Sets[4].NumVal != int32(pdu.ErrAgain) || r.Sets[5].NumVal != int32(pdu.ErrPMID) ||
		r.Sets[6].NumVal != int32(pdu.ErrType) || r.Sets[7].NumVal != 3 {
		t.Errorf("numvals = %d %d %d %d %d", r.Sets[3].NumVal, r.Sets[4].NumVal, r.Sets[5].NumVal, r.Sets[6].NumVal, r.Sets[7].NumVal)
	}
	if !strings.Contains(h.log.String(), "has type 64 but was given a DOUBLE value") {
		t.Errorf("type mismatch not logged: %q", h.log.String())
	}
	// Prepare saw every PMID once, before the values, in request order.
	if len(f.prepared) != 1 || len(f.prepared[0]) != 8 || f.prepared[0][5] != pmidUnknown {
		t.Errorf("prepared = %v", f.prepared)
	}
	if f.values != 7 {
		t.Errorf("Values called %d times, want 7 (unknown PMIDs skipped)", f.values)
	}

	// A whole-fetch failure is one ERROR PDU.
	f.failAll = pdu.ErrAgain
	_, err = h.Fetch(pmidActive)
	wantErr(t, err, pdu.ErrAgain)
}

// panicky panics in Values for one metric, and in Prepare when asked to.
type panicky struct {
	exampleFetcher
	inPrepare bool
}

func (f *panicky) Prepare(req *FetchRequest) error {
	if f.inPrepare {
		panic("prepare went wrong")
	}
	return f.exampleFetcher.Prepare(req)
}

func (f *panicky) Values(m *Metric, w *ValueWriter) error {
	if m.Desc.PMID == pmidCounter {
		w.Uint64(0, 1) // written before the panic: must not be sent
		var table []int
		_ = table[m.Desc.PMID.Item()+5] // index out of range
	}
	return f.exampleFetcher.Values(m, w)
}

// A panic in a Fetcher fails that metric (or that fetch), not the agent.
func TestFetcherPanicIsContained(t *testing.T) {
	f := &panicky{}
	h := startAgent(t, f, exampleSpec(), Config{})
	for range 3 {
		r := h.fetch(0, pmidActive, pmidCounter, pmidDuty)
		if r.Sets[0].NumVal != 1 || r.Sets[1].NumVal != int32(pdu.ErrGeneric) || r.Sets[2].NumVal != 2 {
			t.Fatalf("numvals %d %d %d, want 1, PM_ERR_GENERIC, 2", r.Sets[0].NumVal, r.Sets[1].NumVal, r.Sets[2].NumVal)
		}
	}
	f.inPrepare = true
	_, err := h.Fetch(pmidActive)
	wantErr(t, err, pdu.ErrGeneric)
	f.inPrepare = false
	if r := h.fetch(0, pmidActive); r.Sets[0].NumVal != 1 {
		t.Errorf("after the panics: active numval %d", r.Sets[0].NumVal)
	}

	// Four panics, one report: the first, with the stack that names the
	// culprit; the rest are within the minute.
	log := h.log.String()
	if n := strings.Count(log, "recovered from a panic"); n != 1 {
		t.Errorf("%d panic reports in the log, want 1:\n%s", n, log)
	}
	for _, want := range []string{"index out of range [5]", "(*panicky).Values", "harness_test.go"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if h.agent.panics != 4 {
		t.Errorf("panics counted %d, want 4", h.agent.panics)
	}
}

func TestProfilesPerClient(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	// Client 1 wants cpu1 only; client 2 excludes cpu0; client 0 sent none.
	h.Slot(1).Profile(&pdu.Profile{GState: pdu.ProfileExclude, InDoms: []pdu.ProfileInDom{{InDom: indomCPU, State: pdu.ProfileExclude, Insts: []int32{1}}}})
	h.Slot(2).Profile(&pdu.Profile{InDoms: []pdu.ProfileInDom{{InDom: indomCPU, State: pdu.ProfileInclude, Insts: []int32{0}}}})
	// Neither PROFILE may be answered: the next reply must be this DESC.
	if _, err := h.Desc(pmidActive); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		from int32
		want []int32
	}{{0, []int32{0, 1, 3}}, {1, []int32{1}}, {2, []int32{1, 3}}} {
		r := h.fetch(c.from, pmidCounter, pmidActive)
		if got := r.Sets[0].Insts(); !slices.Equal(got, c.want) {
			t.Errorf("client %d: instances %v, want %v", c.from, got, c.want)
		}
		if r.Sets[1].NumVal != 1 {
			t.Errorf("client %d: singular metric filtered by profile", c.from)
		}
	}
	// Labels of instances follow the profile too.
	sets, err := h.Slot(1).Labels(uint32(indomCPU), pdu.LabelInstances)
	if err != nil || len(sets) != 1 || sets[0].Inst != 1 || string(sets[0].JSON) != `{"cpu":1}` {
		t.Fatalf("instance labels = %+v %v", sets, err)
	}

	// End of context drops client 1's profile: back to everything.
	ended := make(chan int32, 1)
	h.agent.cfg.OnEndContext = func(c int32) { ended <- c }
	h.Slot(1).EndContext()
	if r := h.fetch(1, pmidCounter); len(r.Sets[0].Values) != 3 {
		t.Errorf("after NOTCONN: %v", r.Sets[0].Insts())
	}
	if c := <-ended; c != 1 {
		t.Errorf("OnEndContext(%d)", c)
	}
	// A bad PROFILE is logged and the old one kept.
	h.Slot(2).Profile(&pdu.Profile{GState: 7})
	if r := h.fetch(2, pmidCounter); !slices.Equal(r.Sets[0].Insts(), []int32{1, 3}) {
		t.Errorf("after a bad PROFILE: %v", r.Sets[0].Insts())
	}
}

func TestInstances(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	// The profile never applies to INSTANCE requests.
	h.Profile(&pdu.Profile{GState: pdu.ProfileExclude})
	list, err := h.Instance(indomCPU, pdu.InNull, "")
	if err != nil || len(list) != 3 || string(list[2].Name) != "cpu3 spare" || list[2].Inst != 3 {
		t.Fatalf("all = %+v %v", list, err)
	}
	list, err = h.Instance(indomCPU, 1, "")
	if err != nil || len(list) != 1 || list[0].Inst != pdu.InNull || string(list[0].Name) != "cpu1" {
		t.Fatalf("by id = %+v %v", list, err)
	}
	for _, name := range []string{"cpu0", "cpu3", "cpu3 spare"} {
		list, err = h.Instance(indomCPU, pdu.InNull, name)
		if err != nil || len(list) != 1 || list[0].Name != nil {
			t.Fatalf("by name %q = %+v %v", name, list, err)
		}
	}
	_, err = h.Instance(indomCPU, 2, "")
	wantErr(t, err, pdu.ErrInst)
	_, err = h.Instance(indomCPU, pdu.InNull, "cpu3 other")
	wantErr(t, err, pdu.ErrInst)
	_, err = h.Instance(indomUnknown, pdu.InNull, "")
	wantErr(t, err, pdu.ErrInDom)
}

func TestText(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	for _, c := range []struct {
		ident uint32
		typ   int32
		want  string
	}{
		{uint32(pmidVersion), pdu.TextOneLine | pdu.TextPMID, "Agent version"},
		{uint32(pmidVersion), pdu.TextHelp | pdu.TextPMID, "The version of the example agent."},
		{uint32(indomCPU), pdu.TextOneLine | pdu.TextInDom, "per cpu"},
	} {
		text, err := h.Text(c.ident, c.typ)
		if err != nil || text != c.want {
			t.Errorf("text %#x/%d = %q %v", c.ident, c.typ, text, err)
		}
	}
	for _, q := range [][2]uint32{
		{uint32(pmidActive), pdu.TextOneLine | pdu.TextPMID},
		{uint32(pmidCounter), pdu.TextHelp | pdu.TextPMID},
		{uint32(pmidUnknown), pdu.TextOneLine | pdu.TextPMID},
		{uint32(indomUnknown), pdu.TextOneLine | pdu.TextInDom},
	} {
		_, err := h.Text(q[0], int32(q[1]))
		wantErr(t, err, pdu.ErrText)
	}
}

// A metric's MakeHelp makes its long help when a client asks for it,
// each time, and not before; Help, when given, is served instead.
func TestMakeHelp(t *testing.T) {
	spec := exampleSpec()
	made := 0
	for i := range spec.Metrics {
		switch spec.Metrics[i].Desc.PMID {
		case pmidActive:
			spec.Metrics[i].MakeHelp = func() string { made++; return fmt.Sprintf("Made %d.", made) }
		case pmidVersion:
			spec.Metrics[i].MakeHelp = func() string { t.Error("MakeHelp called beside Help"); return "" }
		}
	}
	h := startAgent(t, &exampleFetcher{}, spec, Config{})
	if made != 0 {
		t.Fatalf("MakeHelp ran %d times before any request", made)
	}
	for _, want := range []string{"Made 1.", "Made 2."} {
		if text, err := h.Text(uint32(pmidActive), pdu.TextHelp|pdu.TextPMID); err != nil || text != want {
			t.Errorf("help of example.active = %q %v, want %q", text, err, want)
		}
	}
	if text, err := h.Text(uint32(pmidVersion), pdu.TextHelp|pdu.TextPMID); err != nil || text != "The version of the example agent." {
		t.Errorf("help of example.version = %q %v", text, err)
	}
}

func (h *harness) traverse(name string) []string {
	h.t.Helper()
	ns, err := h.Traverse(name)
	if err != nil {
		h.t.Fatalf("traverse %s: %v", name, err)
	}
	return ns
}

func TestNamespace(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})

	if id, err := h.PMID("example.dyn.counter.value"); err != nil || id != pmidCounter {
		t.Fatalf("name→PMID = %v %v", id, err)
	}
	for _, bad := range []string{"example.dyn.counter", "example.dyn", "example.nope", "other", "example.dyn."} {
		_, err := h.PMID(bad)
		wantErr(t, err, pdu.ErrName)
	}

	ns, err := h.Names(pmidDuty)
	if err != nil || strings.Join(ns, ",") != "example.dyn.counter.dutycycle" {
		t.Errorf("PMID→names = %v %v", ns, err)
	}
	_, err = h.Names(pmidUnknown)
	wantErr(t, err, pdu.ErrPMID)

	ns, st, err := h.Children("example.dyn")
	if err != nil || strings.Join(ns, ",") != "counter,bytes,broken" || !slices.Equal(st, []int32{1, 0, 0}) {
		t.Errorf("children = %v %v %v", ns, st, err)
	}
	// Without status words (subtype 0), as pmcd asks too.
	list, status, err := h.ask(h.b.NameReq(0, pdu.TypePMNSChild, 0, "example"), pdu.TypePMNSNames).Names(nil)
	if err != nil || status || len(list) != 4 || string(list[0].Name) != "dyn" || string(list[3].Name) != "active" {
		t.Errorf("children of example = %q %v %v, want dyn,derived,version,active without status", list, status, err)
	}
	if ns, _, _ = h.Children("example.version"); len(ns) != 0 {
		t.Errorf("children of a leaf = %v", ns)
	}
	if ns, _, _ = h.Children("example.derived"); len(ns) != 0 {
		t.Errorf("children of an empty subtree = %v", ns)
	}
	_, _, err = h.Children("example.nope")
	wantErr(t, err, pdu.ErrName)

	ns = h.traverse("example.dyn")
	if strings.Join(ns, ",") != "example.dyn.counter.value,example.dyn.counter.dutycycle,example.dyn.bytes,example.dyn.broken" {
		t.Errorf("traverse = %v", ns)
	}
	if ns = h.traverse("example.dyn.bytes"); strings.Join(ns, ",") != "example.dyn.bytes" {
		t.Errorf("traverse of a leaf = %v", ns)
	}
	if ns = h.traverse("example.derived"); len(ns) != 0 {
		t.Errorf("traverse of an empty subtree = %v", ns)
	}
	_, err = h.Traverse("example.derived.x")
	wantErr(t, err, pdu.ErrName)
}

func TestLabels(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	one := func(ident uint32, typ int32) []pdu.LabelSet {
		t.Helper()
		sets, err := h.Labels(ident, typ) // which checks the echo of ident and typ
		if err != nil {
			t.Fatalf("label %#x/%d: %v", ident, typ, err)
		}
		return sets
	}
	check := func(sets []pdu.LabelSet, json string, flags uint8) {
		t.Helper()
		if len(sets) != 1 || string(sets[0].JSON) != json || sets[0].Inst != pdu.InNull || sets[0].Labels[0].Flags != flags {
			t.Errorf("sets = %+v, want %s", sets, json)
		}
	}
	check(one(dom, pdu.LabelDomain), `{"agent":"example"}`, pdu.LabelDomain)
	check(one(uint32(indomCPU), pdu.LabelInDom), `{"device_type":"cpu","indom_name":"per cpu"}`, pdu.LabelInDom)
	check(one(uint32(pdu.NewPMID(dom, 2, 7)), pdu.LabelCluster), `{"cluster":"counters"}`, pdu.LabelCluster)
	check(one(uint32(pmidCounter), pdu.LabelItem), `{"units":"events"}`, pdu.LabelItem)
	if sets := one(uint32(pmidVersion), pdu.LabelItem); len(sets) != 0 {
		t.Errorf("no item labels: %+v", sets)
	}
	if sets := one(uint32(pdu.NewPMID(dom, 0, 0)), pdu.LabelCluster); len(sets) != 0 {
		t.Errorf("no cluster labels: %+v", sets)
	}
	sets := one(uint32(indomCPU), pdu.LabelInstances)
	if len(sets) != 3 || string(sets[2].JSON) != `{"cpu":3}` || sets[2].Inst != 3 || sets[2].Labels[0].Flags != pdu.LabelInstances {
		t.Errorf("instances = %+v", sets)
	}
	_, err := h.Labels(uint32(pmidUnknown), pdu.LabelItem)
	wantErr(t, err, pdu.ErrPMID)
	_, err = h.Labels(uint32(indomUnknown), pdu.LabelInDom)
	wantErr(t, err, pdu.ErrInDom)
	_, err = h.Labels(0, 0x40)
	wantErr(t, err, pdu.ErrType)
}

func TestStoreAttrAndStrays(t *testing.T) {
	attrs := make(chan string, 4)
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{CredFlags: pdu.FlagAuth,
		OnAttr: func(c, k int32, v string) { attrs <- v }})

	h.b.StartResult(3, 0)
	h.b.AddSet(pmidActive)
	h.b.AddInsitu(pdu.InNull, 42)
	store, _ := h.b.Finish()
	h.askErr(store, pdu.ErrPermission)
	// A store whose block index is 2 words off is a decode failure.
	h.b.StartResult(3, 0)
	h.b.AddSet(pmidBytes)
	h.b.AddInt64(pdu.InNull, 1)
	store, _ = h.b.Finish()
	store[35] += 2
	h.askErr(store, pdu.ErrIPC)

	// None of these may be answered.
	h.Slot(5).Attr(pdu.AttrProcessID, []byte("15082\x00"))
	h.send(h.b.Error(5, pdu.ErrGeneric))
	h.send(h.b.Creds(1, pdu.VersionCred(0)))
	h.send([]byte{0, 0, 0, 12, 0, 0, 0x70, 0x0a, 0, 0, 0, 0})
	h.send([]byte{0, 0, 0, 16, 0, 0, 0x70, 0x14, 0, 0, 0, 0, 0, 0, 0, 0})
	// net.Pipe is unbuffered, so the one request that is answered goes last.
	h.send([]byte{0, 0, 0, 12, 0, 0, 0x70, 0x08, 0, 0, 0, 0}) // TEXT_REQ without a body
	if v := <-attrs; v != "15082" {
		t.Errorf("attr = %q", v)
	}
	// The TEXT_REQ without a body gets PM_ERR_IPC, and is the only reply.
	p, err := h.Next()
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Error()
	if err != nil || code != pdu.ErrIPC {
		t.Fatalf("truncated TEXT_REQ: %v %v", code, err)
	}
	if _, err := h.Desc(pmidActive); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"unexpected ERROR PDU", "ignoring unexpected CREDS", "CONTROL_REQ", "HIGHRES_FETCH"} {
		if !strings.Contains(h.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, h.log.String())
		}
	}
}

func TestMalformedRequestsGetIPC(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	var b pdu.Builder
	for name, msg := range map[string][]byte{
		"DESC_REQ long":      append(b.DescReq(0, pmidActive)[:12:12], 0, 0, 0, 20, 0, 0, 0, 0, 1, 2, 3, 4),
		"FETCH zero pmids":   b.Fetch(0, 0, nil),
		"INSTANCE_REQ short": b.InstanceReq(0, indomCPU, pdu.InNull, "")[:28],
		"PMNS_NAMES two": func() []byte {
			b.StartNames(0, false)
			b.AddName("a", 0)
			b.AddName("b", 0)
			m, _ := b.Finish()
			return m
		}(),
		"LABEL_REQ short": b.LabelReq(0, 1, 2)[:16],
		"CHILD namelen":   func() []byte { m := b.NameReq(0, pdu.TypePMNSChild, 0, "abc"); m[19] = 200; return m }(),
	} {
		msg = append([]byte(nil), msg...)
		msg[0], msg[1], msg[2], msg[3] = 0, 0, byte(len(msg)>>8), byte(len(msg))
		t.Run(name, func(t *testing.T) {
			h.t = t
			h.askErr(msg, pdu.ErrIPC)
		})
	}
	h.t = t
	if _, err := h.Desc(pmidActive); err != nil {
		t.Fatal(err)
	}
}

func TestGarbageClosesCleanly(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	h.send([]byte{0, 0, 0, 4, 0, 0, 0x70, 0x04, 0, 0, 0, 0}) // len below 12
	var fe *pdu.FrameError
	if err := h.Wait(); !errors.As(err, &fe) {
		t.Fatalf("Serve = %v, want a framing error", err)
	}
}

func TestEOFEndsServe(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	if err := h.Close(); err != nil {
		t.Fatalf("Serve = %v, want nil at EOF", err)
	}
}

func TestNamesChange(t *testing.T) {
	h := startAgent(t, &exampleFetcher{}, exampleSpec(), Config{})
	if r := h.fetch(0, pmidActive); r.Flags != 0 {
		t.Fatalf("flags = %#x", r.Flags)
	}
	spec := exampleSpec()
	spec.Metrics = append(spec.Metrics, Metric{Name: "example.derived.sum", Desc: pdu.Desc{PMID: pdu.NewPMID(dom, 4, 0), Type: pdu.ValueDouble, InDom: pdu.InDomNull, Sem: pdu.SemCounter}})
	t2, err := NewTable(spec)
	if err != nil {
		t.Fatal(err)
	}
	h.agent.SetTable(t2)
	if ns := h.traverse("example.derived"); strings.Join(ns, ",") != "example.derived.sum" {
		t.Errorf("after swap: %v", ns)
	}
	if r := h.fetch(0, pmidActive); r.Flags != pdu.StateNamesChange {
		t.Errorf("flags after swap = %#x, want NAMES_CHANGE", r.Flags)
	}
	if r := h.fetch(0, pmidActive); r.Flags != 0 {
		t.Errorf("flags are sent once, got %#x again", r.Flags)
	}
}

func TestTableErrors(t *testing.T) {
	for name, mutate := range map[string]func(*TableSpec){
		"duplicate name":  func(s *TableSpec) { s.Metrics[1].Name = s.Metrics[0].Name },
		"leaf and parent": func(s *TableSpec) { s.Metrics[1].Name = "example.version.x" },
		"subtree is leaf": func(s *TableSpec) { s.Subtrees = append(s.Subtrees, "example.version") },
		"empty component": func(s *TableSpec) { s.Metrics[0].Name = "example..x" },
		"unknown indom":   func(s *TableSpec) { s.Metrics[0].Desc.InDom = indomUnknown },
		"pmid clash":      func(s *TableSpec) { s.Metrics[1].Desc.PMID = pmidVersion },
		"bad label name":  func(s *TableSpec) { s.DomainLabels = Labels{"a-b": 1} },
		"dup instance":    func(s *TableSpec) { s.InDoms[0].Instances[1].ID = 0 },
		"dup inst name":   func(s *TableSpec) { s.InDoms[0].Instances[1].Name = "cpu0" },
		"bad label value": func(s *TableSpec) { s.ClusterLabels[2] = Labels{"x": make(chan int)} },
	} {
		s := exampleSpec()
		mutate(&s)
		if _, err := NewTable(s); err == nil {
			t.Errorf("%s: NewTable accepted it", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// Tables swapped from another goroutine while fetches and name lookups run
// (go test -race checks the sharing).
func TestConcurrentTableSwap(t *testing.T) {
	h := startAgent(t, &exampleFetcher{quiet: true}, exampleSpec(), Config{})
	t1, _ := NewTable(exampleSpec())
	spec := exampleSpec()
	spec.Metrics = spec.Metrics[:2]
	t2, _ := NewTable(spec)
	stop := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				h.agent.SetTable(t1)
			} else {
				h.agent.SetTable(t2)
			}
			h.agent.SignalChange(pdu.StateLabelChange)
		}
	}()
	for range 200 {
		r := h.fetch(0, pmidActive, pmidCounter)
		if r.Sets[0].NumVal != 1 {
			t.Fatalf("active: numval %d", r.Sets[0].NumVal)
		}
		if n := r.Sets[1].NumVal; n != 3 && n != int32(pdu.ErrPMID) {
			t.Fatalf("counter: numval %d", n)
		}
		h.traverse("example")
	}
	close(stop)
	<-swapped
}

// A live instance domain answers INSTANCE and label requests from its
// current members, in the same table, as they change.
func TestLiveInstances(t *testing.T) {
	spec := exampleSpec()
	live := NewInstances()
	spec.InDoms[0].Instances, spec.InDoms[0].Live = nil, live
	if err := live.Set([]Instance{{ID: 0, Name: "/a"}, {ID: 1, Name: "/b", Labels: Labels{"cgroup": "/b"}}}); err != nil {
		t.Fatal(err)
	}
	h := startAgent(t, &exampleFetcher{}, spec, Config{})
	names := func() []string {
		list, err := h.Instance(indomCPU, pdu.InNull, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range list {
			out = append(out, fmt.Sprintf("%d=%s", in.Inst, in.Name))
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"0=/a", "1=/b"}) {
		t.Errorf("instances %q", got)
	}
	live.Set([]Instance{{ID: 1, Name: "/b", Labels: Labels{"cgroup": "/b"}}, {ID: 2, Name: "/c", Labels: Labels{"cgroup": "/c"}}})
	if got := names(); !slices.Equal(got, []string{"1=/b", "2=/c"}) {
		t.Errorf("instances after the change %q", got)
	}
	_, err := h.Instance(indomCPU, 0, "")
	wantErr(t, err, pdu.ErrInst)
	list, err := h.Instance(indomCPU, pdu.InNull, "/c")
	if err != nil || len(list) != 1 || list[0].Inst != 2 {
		t.Errorf("by name /c = %+v %v", list, err)
	}
	sets, err := h.Labels(uint32(indomCPU), pdu.LabelInstances)
	if err != nil || len(sets) != 2 || sets[1].Inst != 2 || string(sets[1].JSON) != `{"cgroup":"/c"}` {
		t.Errorf("instance labels = %+v %v", sets, err)
	}
	if err := live.Set([]Instance{{ID: -1, Name: "/x"}}); err == nil {
		t.Error("a negative id was accepted")
	}
	spec.InDoms[0].Instances = []Instance{{ID: 9, Name: "both"}}
	if _, err := NewTable(spec); err == nil {
		t.Error("a domain with static and live instances was accepted")
	}
}
