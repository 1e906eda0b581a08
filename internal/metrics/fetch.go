package metrics

import (
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
	refs    []ref   // by cluster
	skipped []error // metrics Build could not number
	cgroups CgroupReader
	cgNeed  []bool // per cgroup event: asked for by this fetch

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
	// one's own. ratNum is term-major (see ratio.Tracker.Step); an Elapsed
	// ratio's ratDen holds the fetch's clock reading on every instance.
	ratios  []ratio.Chosen
	tracker [2]*ratio.Tracker // by item
	ratGen  [2][]uint32       // by item
	ratNum  [][]uint64
	ratDen  [][]uint64
	ratVal  [2][][]float64 // by item; the whole machine's item fills it unread
	ratOK   [2][][]bool
	ratAll  []float64 // the whole machine's, perfevent.ratio.all.NAME
	ratAlOK []bool
	clock   func() uint64 // nanoseconds, for Elapsed ratios
}

func (s *Source) setRef(cluster int, r ref) {
	for len(s.refs) <= cluster {
		s.refs = append(s.refs, ref{})
	}
	s.refs[cluster] = r
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
	}
	for it := range s.tracker {
		s.tracker[it] = ratio.NewTracker(s.ratios)
	}
}

// Forget drops what the ratios remember of pmcd client slot, which went
// away; call it from pmda.Config.OnEndContext.
func (s *Source) Forget(client int32) {
	for _, t := range s.tracker {
		t.Forget(client)
	}
}

func (s *Source) lookup(pmid pdu.PMID) ref {
	if pmid.Domain() != Domain || pmid.Cluster() >= len(s.refs) {
		return ref{}
	}
	return s.refs[pmid.Cluster()]
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
			if it := pmid.Item(); it < len(s.ratGen) {
				s.ratGen[it][r.idx] = s.gen
			}
		case kindCgroup:
			s.cgNeed[r.idx] = true
		}
	}
	if all {
		f.NeedAll()
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

// stepRatios closes the client's interval of each ratio this fetch asked
// for, from the counts f has just read.
func (s *Source) stepRatios(f *counter.Fetch, client ratio.Client) {
	var now uint64
	for i := range s.ratios {
		cpu, all := s.ratGen[ItemRatioCPU][i] == s.gen, s.ratGen[ItemRatioAll][i] == s.gen
		if !cpu && !all {
			continue
		}
		c := &s.ratios[i]
		k := len(c.CPUs)
		for j, ev := range c.NumEv {
			for n := range k {
				s.ratNum[i][j*k+n] = f.Value(ev, n)
			}
		}
		if c.Elapsed() && now == 0 {
			now = s.clock()
		}
		for n := range k {
			if c.Elapsed() {
				s.ratDen[i][n] = now
			} else {
				s.ratDen[i][n] = f.Value(c.DenEv, n)
			}
		}
		if cpu {
			it := ItemRatioCPU
			s.tracker[it].Step(client, c, i, s.ratNum[i], s.ratDen[i], s.ratVal[it][i], s.ratOK[it][i])
		}
		if all {
			it := ItemRatioAll
			s.ratAll[i], s.ratAlOK[i] = s.tracker[it].Step(client, c, i, s.ratNum[i], s.ratDen[i], s.ratVal[it][i], s.ratOK[it][i])
		}
	}
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
		if pmid.Item() == ItemRatioAll {
			if s.ratAlOK[r.idx] {
				w.Double(pdu.InNull, s.ratAll[r.idx])
			}
			return nil
		}
		cpus := s.ratios[r.idx].CPUs
		for i, v := range s.ratVal[ItemRatioCPU][r.idx] {
			if s.ratOK[ItemRatioCPU][r.idx][i] {
				w.Double(int32(cpus[i]), v)
			}
		}
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
