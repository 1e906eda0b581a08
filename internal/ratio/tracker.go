package ratio

// Client names whose interval a fetch closes: pmcd's client slot and the
// client's context number, both from the FETCH PDU.
type Client struct{ Slot, Ctx int32 }

// Tracker remembers, per client and per ratio, the operand counts of the
// client's previous fetch, so that each client's values cover its own
// interval. It is not safe for concurrent use; the agent calls it from the
// goroutine that serves pmcd. After a client's first fetch of a ratio it
// allocates nothing.
//
// A Tracker belongs to one generation of the agent's counters: a reload
// or a CPU going offline builds new counters and a new Tracker, so each
// client's next fetch after it is a first fetch again (see Step).
type Tracker struct {
	sizes   []size // per ratio
	clients map[Client]*history
}

type size struct{ terms, inst int }

type history struct {
	seen []bool     // per ratio: a previous fetch exists
	num  [][]uint64 // per ratio, term-major: num[r][j*inst+i]
	den  [][]uint64 // per ratio, per instance
}

// NewTracker tracks the ratios of chosen, each with len(NumEv) numerator
// terms on len(CPUs) instances.
func NewTracker(chosen []Chosen) *Tracker {
	t := &Tracker{sizes: make([]size, len(chosen)), clients: map[Client]*history{}}
	for r, c := range chosen {
		t.sizes[r] = size{len(c.NumEv), len(c.CPUs)}
	}
	return t
}

// Step records the cumulative operand counts of ratio r for client c and
// writes into val and ok the ratio over the interval since c's previous
// Step of r: ok[i] is false where there is no value (the first Step, or a
// denominator that did not move). num holds each numerator event's counts
// term-major (num[j*len(val)+i] is event NumEv[j] on instance i), den the
// denominator's per instance; for an Elapsed ratio den[i] is the fetch's
// clock reading in nanoseconds.
//
// It returns the whole machine's ratio over the same interval, Scale ×
// ΣΔnum / ΣΔden over the instances, which weighs each CPU by its
// denominator as perf stat -a does; over Elapsed the denominator is the
// interval itself, not a sum of it. Unsigned differences stay right across
// a counter's wrap.
func (t *Tracker) Step(c Client, ch *Chosen, r int, num, den []uint64, val []float64, ok []bool) (all float64, allOK bool) {
	h := t.clients[c]
	if h == nil {
		h = &history{seen: make([]bool, len(t.sizes)), num: make([][]uint64, len(t.sizes)), den: make([][]uint64, len(t.sizes))}
		for i, n := range t.sizes {
			h.num[i] = make([]uint64, n.terms*n.inst)
			h.den[i] = make([]uint64, n.inst)
		}
		t.clients[c] = h
	}
	seen := h.seen[r]
	h.seen[r] = true
	pn, pd := h.num[r], h.den[r]
	k := len(val)
	var sumNum float64
	var sumDen uint64
	for i := range val {
		var dNum float64
		for j, w := range ch.NumW {
			x := j*k + i
			dNum += w * float64(num[x]-pn[x])
			pn[x] = num[x]
		}
		dDen := den[i] - pd[i]
		pd[i] = den[i]
		if !seen {
			val[i], ok[i] = 0, false
			continue
		}
		val[i], ok[i] = ch.Of(dNum, dDen)
		sumNum += dNum
		if ch.Elapsed() {
			sumDen = dDen
		} else {
			sumDen += dDen
		}
	}
	if !seen {
		return 0, false
	}
	return ch.Of(sumNum, sumDen)
}

// Forget drops every context of pmcd client slot, which has gone away.
func (t *Tracker) Forget(slot int32) {
	for c := range t.clients {
		if c.Slot == slot {
			delete(t.clients, c)
		}
	}
}

// Clients is the number of contexts remembered, for tests and status.
func (t *Tracker) Clients() int { return len(t.clients) }
