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
// client's next fetch after it is a first fetch again (see Step), which
// the agent's own Recent answers.
type Tracker struct {
	sizes []size // per ratio
	// x and all are, per compound ratio, the increases of its terms on
	// one instance and summed over the instances: room for Step.
	x, all  [][]float64
	clients map[Client]*history
	swept   uint64 // when Step last looked for idle clients
}

// Idle is how long a client may go without fetching before its history is
// dropped. pmcd says when a client slot goes away, but not when one of its
// contexts does, and libpcp never reuses a context's number: pmproxy makes
// a context per stateless REST request or scrape, so while its connection
// to pmcd lasts, the histories could otherwise pile up. A client dropped this way is served
// the agent's interval on its next fetch, which, when nobody else fetched
// meanwhile, reaches back to its own previous fetch anyway. An hour is
// longer than any logging interval in common use.
const Idle = uint64(3600e9)

type size struct{ terms, inst int }

type history struct {
	last uint64     // the clock at the client's latest Step
	seen []bool     // per ratio: a previous fetch exists
	num  [][]uint64 // per ratio, term-major: num[r][j*inst+i]
	den  [][]uint64 // per ratio, per instance
}

// NewTracker tracks the ratios of chosen, each with len(NumEv) numerator
// terms on len(CPUs) instances.
func NewTracker(chosen []Chosen) *Tracker {
	t := &Tracker{sizes: make([]size, len(chosen)), clients: map[Client]*history{},
		x: make([][]float64, len(chosen)), all: make([][]float64, len(chosen))}
	for r, c := range chosen {
		t.sizes[r] = size{len(c.NumEv), len(c.CPUs)}
		if c.Compound != nil {
			t.x[r], t.all[r] = make([]float64, len(c.Num)), make([]float64, len(c.Num))
		}
	}
	return t
}

// Step records the cumulative operand counts of ratio r for client c and
// writes into val and ok the ratio over the interval since c's previous
// Step of r: ok[i] is false where there is no value (a denominator that did
// not move). num holds each numerator event's counts term-major
// (num[j*len(val)+i] is event NumEv[j] on instance i), den the
// denominator's per instance; for an Elapsed ratio den[i] is the fetch's
// clock reading in nanoseconds.
//
// On c's first Step of r the interval starts at base instead, the agent's
// own recent sample (Recent.Base); with a nil base the first Step has no
// value, as PCP's rate() has none for its first sample.
//
// It returns the whole machine's ratio over the same interval, Scale ×
// ΣΔnum / ΣΔden over the instances, which weighs each CPU by its
// denominator as perf stat -a does; over Elapsed the denominator is the
// interval itself, not a sum of it. Unsigned differences stay right across
// a counter's wrap. now is the agent's monotonic clock: a new client's
// Step drops the clients that have not stepped for Idle.
func (t *Tracker) Step(c Client, now uint64, ch *Chosen, r int, num, den []uint64, base *Sample, val []float64, ok []bool) (all float64, allOK bool) {
	h := t.clients[c]
	if h == nil {
		t.sweep(now)
		h = &history{seen: make([]bool, len(t.sizes)), num: make([][]uint64, len(t.sizes)), den: make([][]uint64, len(t.sizes))}
		for i, n := range t.sizes {
			h.num[i] = make([]uint64, n.terms*n.inst)
			h.den[i] = make([]uint64, n.inst)
		}
		t.clients[c] = h
	}
	h.last = now
	pn, pd := h.num[r], h.den[r]
	// fn and fd are where the interval starts; when they are the client's
	// own, each element is read before it is overwritten below.
	fn, fd := pn, pd
	if !h.seen[r] {
		h.seen[r] = true
		if base == nil {
			copy(pn, num)
			copy(pd, den)
			clear(ok)
			return 0, false
		}
		fn, fd = base.Num, base.Den
	}
	k := len(val)
	if ch.Compound != nil {
		return t.stepCompound(ch, r, num, den, fn, pn, pd, val, ok)
	}
	var sumNum float64
	var sumDen uint64
	for i := range val {
		var dNum float64
		for j, w := range ch.NumW {
			x := j*k + i
			dNum += w * float64(num[x]-fn[x])
			pn[x] = num[x]
		}
		dDen := den[i] - fd[i]
		pd[i] = den[i]
		val[i], ok[i] = ch.Of(dNum, dDen)
		sumNum += dNum
		if ch.Elapsed() {
			sumDen = dDen
		} else {
			sumDen += dDen
		}
	}
	return ch.Of(sumNum, sumDen)
}

// stepCompound is Step's interval of a compound ratio, from fn (where it
// starts) to num, the client's history pn and pd updated: each instance's
// value over its terms' increases, and the whole machine's over their sums.
func (t *Tracker) stepCompound(ch *Chosen, r int, num, den []uint64, fn, pn, pd []uint64, val []float64, ok []bool) (float64, bool) {
	k := len(val)
	x, all := t.x[r], t.all[r]
	clear(all)
	for i := range val {
		clear(x)
		for j, w := range ch.NumW {
			at := j*k + i
			x[ch.Term[j]] += w * float64(num[at]-fn[at])
			pn[at] = num[at]
		}
		pd[i] = den[i]
		for j := range x {
			all[j] += x[j]
		}
		val[i], ok[i] = ch.OfTerms(x)
	}
	return ch.OfTerms(all)
}

// sweep drops the clients idle for Idle, looking at most every Idle/4.
func (t *Tracker) sweep(now uint64) {
	if now-t.swept < Idle/4 {
		return
	}
	t.swept = now
	for c, h := range t.clients {
		if now-h.last > Idle {
			delete(t.clients, c)
		}
	}
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

// Sample is one reading of a ratio's cumulative operands, laid out as
// Step takes them, at time T (the agent's monotonic clock, nanoseconds).
type Sample struct {
	T        uint64
	Num, Den []uint64
}

// Recent is the agent's own recent interval of each ratio, which a client
// with no previous fetch of it is served: its first fetch, and its first
// after a reload, get the ratio over the interval from the newest sample
// at least Span old up to the fetch. The samples are the fetches of the
// ratio by any client: nothing wakes the agent to take them, so when
// nobody fetched the ratio in the last Span the interval reaches back to
// the latest fetch by anyone, or to the sample Seed took when the counters
// were opened. It keeps up to recentSlots samples per ratio, at least
// Span/recentSlots apart, so a ratio fetched often is served an interval
// of Span to Span × (1 + 1/recentSlots). Not safe for concurrent use.
type Recent struct {
	span  uint64
	rings []ring
}

// recentSlots is how many samples a ratio keeps: four make the interval
// at most a quarter longer than Span and cost four copies of the
// operands a Span.
const recentSlots = 4

type ring struct {
	n, last int // samples held; the newest's slot
	s       [recentSlots]Sample
}

// NewRecent keeps samples of the ratios of chosen for intervals of span
// nanoseconds.
func NewRecent(chosen []Chosen, span uint64) *Recent {
	r := &Recent{span: span, rings: make([]ring, len(chosen))}
	for i, c := range chosen {
		g := &r.rings[i]
		g.last = recentSlots - 1
		for j := range g.s {
			g.s[j].Num = make([]uint64, len(c.NumEv)*len(c.CPUs))
			g.s[j].Den = make([]uint64, len(c.CPUs))
		}
	}
	return r
}

// Empty reports whether ratio r has no sample yet.
func (r *Recent) Empty(ratio int) bool { return r.rings[ratio].n == 0 }

// Record offers a reading of ratio's operands at now. It is kept if it is
// the first or comes at least Span/recentSlots after the newest kept.
func (r *Recent) Record(ratio int, now uint64, num, den []uint64) {
	g := &r.rings[ratio]
	if g.n > 0 && now-g.s[g.last].T < r.span/recentSlots {
		return
	}
	g.last = (g.last + 1) % recentSlots
	s := &g.s[g.last]
	s.T = now
	copy(s.Num, num)
	copy(s.Den, den)
	g.n = min(g.n+1, recentSlots)
}

// Base is where a new client's interval of ratio starts at now: the newest
// sample at least Span old, else the oldest there is; nil when there is
// none.
func (r *Recent) Base(ratio int, now uint64) *Sample {
	g := &r.rings[ratio]
	if g.n == 0 {
		return nil
	}
	i := g.last
	for range g.n - 1 {
		if now-g.s[i].T >= r.span {
			return &g.s[i]
		}
		i = (i + recentSlots - 1) % recentSlots
	}
	return &g.s[i]
}
