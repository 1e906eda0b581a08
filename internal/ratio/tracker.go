package ratio

// Client names whose interval a fetch closes: pmcd's client slot and the
// client's context number, both from the FETCH PDU.
type Client struct{ Slot, Ctx int32 }

// Tracker remembers, per client and per ratio, the operand counts of the
// client's previous fetch, so that each client's values cover its own
// interval. It is not safe for concurrent use; the agent calls it from the
// goroutine that serves pmcd. After a client's first fetch of a ratio it
// allocates nothing.
type Tracker struct {
	sizes   []int // instances per ratio
	clients map[Client]*history
}

type history struct {
	seen     []bool     // per ratio: a previous fetch exists
	num, den [][]uint64 // per ratio, per instance
}

// NewTracker tracks len(sizes) ratios, ratio r having sizes[r] instances.
func NewTracker(sizes []int) *Tracker {
	return &Tracker{sizes: sizes, clients: map[Client]*history{}}
}

// Step records the cumulative operand counts of ratio r for client c, one
// per instance, and writes into val and ok the ratio over the interval since
// c's previous Step of r: ok[i] is false where there is no value (the first
// Step, or a denominator that did not move). It returns the whole machine's
// ratio over the same interval, Scale × ΣΔnum / ΣΔden over the instances,
// which weighs each CPU by its denominator as perf stat -a does. Unsigned
// differences stay right across a counter's wrap.
func (t *Tracker) Step(c Client, d *Def, r int, num, den []uint64, val []float64, ok []bool) (all float64, allOK bool) {
	h := t.clients[c]
	if h == nil {
		h = &history{seen: make([]bool, len(t.sizes)), num: make([][]uint64, len(t.sizes)), den: make([][]uint64, len(t.sizes))}
		for i, n := range t.sizes {
			h.num[i] = make([]uint64, n)
			h.den[i] = make([]uint64, n)
		}
		t.clients[c] = h
	}
	pn, pd := h.num[r], h.den[r]
	var sumNum, sumDen uint64
	for i := range num {
		if h.seen[r] {
			val[i], ok[i] = d.Of(num[i]-pn[i], den[i]-pd[i])
			sumNum += num[i] - pn[i]
			sumDen += den[i] - pd[i]
		} else {
			val[i], ok[i] = 0, false
		}
		pn[i], pd[i] = num[i], den[i]
	}
	seen := h.seen[r]
	h.seen[r] = true
	if !seen {
		return 0, false
	}
	return d.Of(sumNum, sumDen)
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
