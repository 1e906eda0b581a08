package metrics

import (
	"math"
	"strings"
	"time"

	"perfevent/internal/counter"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/ratio"
)

type kind uint8

const (
	kindNone kind = iota
	kindStatic
	kindDerivedActive
	kindCounter
	kindDerived
	kindRatio
	kindCgroup
	kindReservation
	kindEmpty // a name of the C agent's that nothing here counts (CMetric)
)

// ref says what a cluster holds; Source looks clusters up by number, which
// costs an index rather than a map lookup on every value.
type ref struct {
	kind kind
	idx  int // event or derived index in the Set
}

// Source answers fetches from a counter.Set. It implements pmda.Fetcher.
//
// Prepare reads, once, only the counters that the fetch's metrics use, and
// copies their values while it holds the Set; Values then answers from that
// copy. So every metric of one fetch comes from one consistent snapshot, and
// the Set is never held while the reply is built.
type Source struct {
	set     *counter.Set
	version string
	refs    []ref        // by cluster, below FirstOwn
	ownRefs []ref        // by cluster - FirstOwn: a slice from 0 would hold 2046 unused refs
	skipped []error      // metrics Build could not number
	cpus    cpuInstances // while Build runs
	cgroups CgroupReader
	cgNeed  []bool // per cgroup event: asked for by this fetch
	resv    ReservationReader
	// The reservation as this fetch saw it, when it asked for it.
	resvSnap   Reservation
	resvNow    time.Time
	cgMode     func() string
	cgCounting func() string

	// The snapshot of the current fetch. gen stamps what this fetch marked,
	// so nothing needs clearing between fetches.
	gen      uint32
	evGen    []uint32
	derGen   []uint32
	values   [][]uint64
	duty     [][]float64
	derived  [][]float64
	active   int32
	reserved bool

	// Ratios: operand counts copied from the Set, and each ratio's value
	// over the interval since the fetching client's previous fetch of it.
	// Each item (per CPU, whole machine) has its own tracker and marks, so
	// that a client logging the two at different intervals gets each
	// one's own; a client's first fetch starts from recent, the agent's
	// own samples, which both share. ratNum is term-major (see
	// ratio.Tracker.Step); an Elapsed ratio's ratDen holds the fetch's
	// clock reading on every instance.
	ratios  []ratio.Chosen
	tracker [2]*ratio.Tracker // by item
	recent  *ratio.Recent
	ratGen  [2][]uint32 // by item
	ratRead []uint32    // any item, operands included: read by this fetch
	ratNum  [][]uint64
	ratDen  [][]uint64
	ratIntW [][]uint64     // per ratio: its weights when all are whole numbers, else nil
	ratVal  [2][][]float64 // by item; the whole machine's item fills it unread
	ratOK   [2][][]bool
	ratAll  []float64 // the whole machine's, perfevent.ratio.all.NAME
	ratAlOK []bool
	clock   func() uint64 // nanoseconds, for Elapsed ratios and recent
	born    uint64        // the clock when Build ran, just after the counters opened
	seeded  bool          // recent holds the counts at born
}

// recentSpan is the length of the agent's own interval, which a client's
// first fetch of a ratio is served: long enough to hold many scheduler
// ticks and multiplexing rotations, short enough to be "now".
const recentSpan = uint64(time.Second)

func (s *Source) setRef(cluster int, r ref) {
	refs, i := &s.refs, cluster
	if cluster >= FirstOwn {
		refs, i = &s.ownRefs, cluster-FirstOwn
	}
	if i >= len(*refs) {
		// Clusters need not come in order: grown once, to this one.
		*refs = append(*refs, make([]ref, i+1-len(*refs))...)
	}
	(*refs)[i] = r
}

// prepare sizes the snapshot once, so fetches allocate nothing.
func (s *Source) prepare() {
	n := s.set.NumEvents()
	s.evGen = make([]uint32, n)
	s.values = make([][]uint64, n)
	s.duty = make([][]float64, n)
	for ev := range n {
		k := len(s.set.CPUs(ev))
		s.values[ev] = make([]uint64, k)
		s.duty[ev] = make([]float64, k)
	}
	d := s.set.NumDerived()
	s.derGen = make([]uint32, d)
	s.derived = make([][]float64, d)
	for i := range d {
		s.derived[i] = make([]float64, len(s.set.DerivedCPUs(i)))
	}
	r := len(s.ratios)
	s.ratNum, s.ratDen = make([][]uint64, r), make([][]uint64, r)
	s.ratAll, s.ratAlOK = make([]float64, r), make([]bool, r)
	s.ratRead, s.ratIntW = make([]uint32, r), make([][]uint64, r)
	for it := range s.tracker {
		s.ratGen[it] = make([]uint32, r)
		s.ratVal[it], s.ratOK[it] = make([][]float64, r), make([][]bool, r)
	}
	for i, c := range s.ratios {
		k := len(c.CPUs)
		s.ratNum[i], s.ratDen[i] = make([]uint64, len(c.NumEv)*k), make([]uint64, k)
		for it := range s.tracker {
			s.ratVal[it][i], s.ratOK[it][i] = make([]float64, k), make([]bool, k)
		}
		s.ratIntW[i] = wholeWeights(c.NumW)
	}
	for it := range s.tracker {
		s.tracker[it] = ratio.NewTracker(s.ratios)
	}
	s.recent = ratio.NewRecent(s.ratios, recentSpan)
}

// wholeWeights is w as integers, if every weight is one below 2^53 (1, or
// 64 bytes per CAS command), so that weighted operands stay exact; else nil.
func wholeWeights(w []float64) []uint64 {
	out := make([]uint64, len(w))
	for j, x := range w {
		if x < 0 || x >= 1<<53 || x != math.Trunc(x) {
			return nil
		}
		out[j] = uint64(x)
	}
	return out
}

// Forget drops what the ratios remember of pmcd client slot, which went
// away; call it from pmda.Config.OnEndContext.
func (s *Source) Forget(client int32) {
	for _, t := range s.tracker {
		t.Forget(client)
	}
}

func (s *Source) lookup(pmid pdu.PMID) ref {
	if pmid.Domain() != Domain {
		return ref{}
	}
	refs, i := s.refs, pmid.Cluster()
	if i >= FirstOwn {
		refs, i = s.ownRefs, i-FirstOwn
	}
	if i >= len(refs) {
		return ref{}
	}
	return refs[i]
}

// Prepare implements pmda.Fetcher.
func (s *Source) Prepare(req *pmda.FetchRequest) error {
	s.gen++
	s.prepareSet(req)
	s.readCgroups()
	return nil
}

// prepareSet reads what the fetch needs of the Set and marks the cgroup
// events it asks for.
func (s *Source) prepareSet(req *pmda.FetchRequest) {
	s.resvNow = time.Time{}
	f := s.set.Begin()
	defer f.End()
	all := false
	for _, pmid := range req.PMIDs {
		switch r := s.lookup(pmid); r.kind {
		case kindStatic:
			// perfevent.active counts the descriptors read by this
			// fetch, as in the C agent, so it reads them all; a
			// client that only watches active still sees it move.
			all = all || pmid.Item() == 1
		case kindCounter:
			f.Need(r.idx)
			s.evGen[r.idx] = s.gen
		case kindDerived:
			f.NeedDerived(r.idx)
			s.derGen[r.idx] = s.gen
		case kindRatio:
			c := &s.ratios[r.idx]
			for _, ev := range c.NumEv {
				f.Need(ev)
			}
			if !c.Elapsed() {
				f.Need(c.DenEv)
			}
			s.ratRead[r.idx] = s.gen
			if it := pmid.Item(); it < len(s.ratGen) {
				s.ratGen[it][r.idx] = s.gen
			}
		case kindCgroup:
			s.cgNeed[r.idx] = true
		case kindReservation:
			if s.resvNow.IsZero() {
				s.resv.Reservation(&s.resvSnap)
				s.resvNow = time.Now()
			}
		}
	}
	if all {
		f.NeedAll()
	}
	if !s.seeded {
		s.seed(f)
	}
	f.Read()
	s.stepRatios(f, ratio.Client{Slot: req.Client, Ctx: req.Ctx})
	for ev, g := range s.evGen {
		if g != s.gen {
			continue
		}
		for i := range s.values[ev] {
			s.values[ev][i] = f.Value(ev, i)
			s.duty[ev][i] = f.Dutycycle(ev, i)
		}
	}
	for d, g := range s.derGen {
		if g != s.gen {
			continue
		}
		for i := range s.derived[d] {
			s.derived[d][i] = f.DerivedValue(d, i)
		}
	}
	s.active = int32(f.Active())
	s.reserved = f.Reserved()
}

// seed gives the agent's own samples (recent) their first: the counts the
// counters started from, before this generation's first read, at the time
// they were opened. So the first fetch of a ratio, by any client, has an
// interval: since the counters were opened, at start-up or by a reload.
func (s *Source) seed(f *counter.Fetch) {
	s.seeded = true
	for i := range s.ratios {
		s.copyOperands(f, i, s.born)
		s.recent.Record(i, s.born, s.ratNum[i], s.ratDen[i])
	}
}

// copyOperands copies ratio i's cumulative operands from f; now is the
// denominator of an Elapsed ratio.
func (s *Source) copyOperands(f *counter.Fetch, i int, now uint64) {
	c := &s.ratios[i]
	k := len(c.CPUs)
	for j, ev := range c.NumEv {
		for n := range k {
			s.ratNum[i][j*k+n] = f.Value(ev, n)
		}
	}
	for n := range k {
		if c.Elapsed() {
			s.ratDen[i][n] = now
		} else {
			s.ratDen[i][n] = f.Value(c.DenEv, n)
		}
	}
}

// stepRatios closes the client's interval of each ratio this fetch asked
// for, from the counts f has just read, and offers them to recent.
func (s *Source) stepRatios(f *counter.Fetch, client ratio.Client) {
	var now uint64
	for i := range s.ratios {
		if s.ratRead[i] != s.gen {
			continue
		}
		if now == 0 {
			now = s.clock()
		}
		s.copyOperands(f, i, now)
		c := &s.ratios[i]
		base := s.recent.Base(i, now)
		if s.ratGen[ItemRatioCPU][i] == s.gen {
			it := ItemRatioCPU
			s.tracker[it].Step(client, now, c, i, s.ratNum[i], s.ratDen[i], base, s.ratVal[it][i], s.ratOK[it][i])
		}
		if s.ratGen[ItemRatioAll][i] == s.gen {
			it := ItemRatioAll
			s.ratAll[i], s.ratAlOK[i] = s.tracker[it].Step(client, now, c, i, s.ratNum[i], s.ratDen[i], base, s.ratVal[it][i], s.ratOK[it][i])
		}
		s.recent.Record(i, now, s.ratNum[i], s.ratDen[i])
	}
}

// numerator is ratio i's cumulative numerator on instance n as last
// copied: the weighted sum of its events, rounded when a weight is not a
// whole number.
func (s *Source) numerator(i, n int) uint64 {
	c := &s.ratios[i]
	k := len(c.CPUs)
	if w := s.ratIntW[i]; w != nil {
		var v uint64
		for j := range w {
			v += w[j] * s.ratNum[i][j*k+n]
		}
		return v
	}
	var v float64
	for j, w := range c.NumW {
		v += w * float64(s.ratNum[i][j*k+n])
	}
	return uint64(math.Round(v))
}

// readCgroups reads the per-cgroup events this fetch asked for, after
// the Set is let go: the cgroups have locks of their own.
func (s *Source) readCgroups() {
	if s.cgroups == nil {
		return
	}
	for _, n := range s.cgNeed {
		if n {
			s.cgroups.Read(s.cgNeed)
			break
		}
	}
	clear(s.cgNeed)
}

// counting is perfevent.cgroup.counting's value.
func (s *Source) counting() string {
	if s.cgCounting != nil {
		return s.cgCounting()
	}
	mode := "off: no per-cgroup events (cgroups.conf)"
	if s.cgMode != nil {
		mode = s.cgMode()
	}
	if strings.HasPrefix(mode, "off: ") {
		return mode
	}
	return "perf"
}

// Values implements pmda.Fetcher.
func (s *Source) Values(m *pmda.Metric, w *pmda.ValueWriter) error {
	pmid := m.Desc.PMID
	r := s.lookup(pmid)
	switch r.kind {
	case kindStatic:
		switch pmid.Item() {
		case 0:
			w.String(pdu.InNull, s.version)
		case 1:
			w.Int32(pdu.InNull, s.active)
		case 3:
			mode := "off: no per-cgroup events (cgroups.conf)"
			if s.cgMode != nil {
				mode = s.cgMode()
			}
			w.String(pdu.InNull, mode)
		case 4:
			w.String(pdu.InNull, s.counting())
		default:
			n := 0
			if s.cgroups != nil {
				n = s.cgroups.Counted()
			}
			w.Uint32(pdu.InNull, uint32(n))
		}
	case kindDerivedActive:
		w.Int32(pdu.InNull, int32(s.set.NumDerived()))
	case kindCounter:
		cpus := s.set.CPUs(r.idx)
		if pmid.Item() == ItemValue {
			for i, v := range s.values[r.idx] {
				w.Int64(int32(cpus[i]), int64(v))
			}
		} else {
			for i, v := range s.duty[r.idx] {
				w.Double(int32(cpus[i]), v)
			}
		}
	case kindDerived:
		cpus := s.set.DerivedCPUs(r.idx)
		for i, v := range s.derived[r.idx] {
			w.Double(int32(cpus[i]), v)
		}
	case kindRatio:
		s.ratioValues(pmid.Item(), r.idx, w)
	case kindReservation:
		return s.reservationValues(pmid.Item(), w)
	case kindCgroup:
		c := s.cgroups
		for i := range c.Len() {
			id, v, duty := c.At(i, r.idx)
			if pmid.Item() == ItemValue {
				w.Int64(id, int64(v))
			} else {
				w.Double(id, duty)
			}
		}
	case kindEmpty:
		// numval 0, as the C agent answers for the names of the
		// [dynamic] events it does not count.
	default:
		return pdu.ErrPMID
	}
	return nil
}

// ratioValues writes item it of ratio i: its value per CPU or for the
// whole machine, or an operand.
func (s *Source) ratioValues(it, i int, w *pmda.ValueWriter) {
	c := &s.ratios[i]
	switch it {
	case ItemRatioCPU:
		for n, v := range s.ratVal[ItemRatioCPU][i] {
			if s.ratOK[ItemRatioCPU][i][n] {
				w.Double(int32(c.CPUs[n]), v)
			}
		}
	case ItemRatioAll:
		if s.ratAlOK[i] {
			w.Double(pdu.InNull, s.ratAll[i])
		}
	case ItemNumeratorCPU:
		for n, cpu := range c.CPUs {
			w.Uint64(int32(cpu), s.numerator(i, n))
		}
	case ItemDenominatorCPU:
		for n, cpu := range c.CPUs {
			w.Uint64(int32(cpu), s.ratDen[i][n])
		}
	case ItemNumeratorAll:
		var v uint64
		for n := range c.CPUs {
			v += s.numerator(i, n)
		}
		w.Uint64(pdu.InNull, v)
	case ItemDenominatorAll:
		var v uint64
		for n := range c.CPUs {
			if c.Elapsed() {
				v = s.ratDen[i][n] // the clock, the same on every instance
			} else {
				v += s.ratDen[i][n]
			}
		}
		w.Uint64(pdu.InNull, v)
	}
}
