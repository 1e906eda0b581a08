package ratio

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
)

// Chosen is a ratio this machine can serve: its operands' event indexes in
// the counter.Set and the CPUs they count on, which are its instances.
type Chosen struct {
	Def
	NumEv []int     // every event of the numerator, in Set order per term
	NumW  []float64 // the weight of each, parallel to NumEv: 1, or bytes per count
	DenEv int       // the denominator's event; -1 for Elapsed
	CPUs  []int
	Term  []int // the Num term of each of NumEv
	poly  *compiled
}

// Elapsed reports whether the denominator is wall-clock time.
func (c *Chosen) Elapsed() bool { return c.DenEv < 0 }

// Scales gives the kernel's scale and unit of a configured event, as its
// sysfs .scale and .unit files say (setup.Plan.Scale); ok is false when
// the kernel says nothing. A nil Scales knows nothing.
type Scales func(event string) (scale float64, unit string, ok bool)

// Select keeps the ratios of defs whose operands are all served by set on
// the same CPUs, in defs order, and says for each of the others why not, in
// one line for the log: why[i] is about defs[i], "" when it was chosen.
// Call it after set.Open. Of a name defined twice, the first definition
// that can be served is kept.
func Select(defs []Def, set *counter.Set, scales Scales) (chosen []Chosen, why []string) {
	return selectSaying(defs, set, scales, nil)
}

// selectSaying is Select writing why only of the defs that say reports
// (nil: every def), the others' lines being read by nobody.
func selectSaying(defs []Def, set *counter.Set, scales Scales, say func(i int) bool) (chosen []Chosen, why []string) {
	seen := map[string]bool{}
	why = make([]string, len(defs))
	names := make([]string, set.NumEvents())
	for ev := range names {
		if len(set.CPUs(ev)) > 0 {
			names[ev] = set.Name(ev)
		}
	}
	for i, d := range defs {
		quiet := say != nil && !say(i)
		if err := d.Check(); err != nil {
			if !quiet {
				why[i] = err.Error()
			}
			continue
		}
		if seen[d.Name] {
			if !quiet {
				why[i] = fmt.Sprintf("ratio %q is defined twice; the first definition is kept", d.Name)
			}
			continue
		}
		c := Chosen{Def: d, DenEv: -1}
		var missing []string
		var termOf []int // the Num term of each of c.NumEv
		for j, term := range d.Num {
			evs := match(term, names)
			if len(evs) == 0 {
				missing = append(missing, term)
			}
			c.NumEv = append(c.NumEv, evs...)
			for range evs {
				termOf = append(termOf, j)
			}
		}
		if d.Den != Elapsed {
			// The first alternative: a denominator is one event.
			if evs := match(d.Den, names); len(evs) > 0 {
				c.DenEv = evs[0]
			} else {
				missing = append(missing, d.Den)
			}
		}
		if len(missing) > 0 {
			if quiet {
				continue
			}
			why[i] = fmt.Sprintf("ratio %q not served: %s not counted here (not configured, or opened on no CPU)", d.Name, orList(missing))
			continue
		}
		c.CPUs = set.CPUs(c.NumEv[0])
		var apart []string
		for _, ev := range c.NumEv[1:] {
			if !slices.Equal(set.CPUs(ev), c.CPUs) {
				apart = append(apart, set.Name(ev))
			}
		}
		if c.DenEv >= 0 && !slices.Equal(set.CPUs(c.DenEv), c.CPUs) {
			apart = append(apart, set.Name(c.DenEv))
		}
		if len(apart) > 0 {
			if quiet {
				continue
			}
			why[i] = fmt.Sprintf("ratio %q not served: %s and %s count on different CPUs", d.Name, set.Name(c.NumEv[0]), strings.Join(apart, ", "))
			continue
		}
		c.Term = termOf
		if d.Compound != nil {
			c.poly = compile(&d)
		}
		c.NumW = make([]float64, len(c.NumEv))
		for j, ev := range c.NumEv {
			c.NumW[j] = d.weight(termOf[j])
			switch {
			case d.Bytes:
				c.NumW[j] *= bytesPerCount(set.Name(ev), scales)
			case d.KernelScale:
				c.NumW[j] *= kernelScale(set.Name(ev), scales)
			}
		}
		seen[d.Name] = true
		chosen = append(chosen, c)
	}
	return chosen, why
}

// match returns the indexes of the names that term matches, in order: of
// its alternatives ("|"), the first that matches anything. So a term that
// lists one event under several names (the kernel's and libpfm4's) never
// counts it twice. "" in names is an event not served; nothing matches it.
func match(term string, names []string) []int {
	var evs []int
	for _, alt := range strings.Split(term, "|") {
		// Most alternatives are plain names: comparing them with each
		// served name costs a glob match less apiece, thousands at a
		// start with many events and the catalog's ratios.
		// A glob's part before its first special character matches only
		// itself: a name without it is no match, and needs no glob match.
		lit := strings.IndexAny(alt, `*?[\`)
		glob := lit >= 0
		for i, name := range names {
			if name == "" {
				continue
			}
			if alt == name {
				evs = append(evs, i)
			} else if glob && strings.HasPrefix(name, alt[:lit]) {
				if ok, _ := path.Match(alt, name); ok {
					evs = append(evs, i)
				}
			}
		}
		if len(evs) > 0 {
			break
		}
	}
	return evs
}

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// byteUnit is the size of one of the kernel's .unit spellings, in bytes.
func byteUnit(unit string) (float64, bool) {
	switch unit {
	case "Bytes", "B":
		return 1, true
	case "KiB":
		return 1 << 10, true
	case "MiB":
		return 1 << 20, true
	case "GiB":
		return 1 << 30, true
	case "KB":
		return 1e3, true
	case "MB":
		return 1e6, true
	case "GB":
		return 1e9, true
	}
	return 0, false
}

// bytesPerCount is what one count of event stands for: the kernel's scale
// in its unit, or BytesPerCAS when the kernel gives no size.
func bytesPerCount(event string, scales Scales) float64 {
	if scales != nil {
		if s, unit, ok := scales(event); ok && s > 0 {
			if f, ok := byteUnit(unit); ok {
				return s * f
			}
		}
	}
	return BytesPerCAS
}

// kernelScale is the kernel's .scale of event, or 1 when it gives none.
func kernelScale(event string, scales Scales) float64 {
	if scales != nil {
		if s, _, ok := scales(event); ok && s > 0 {
			return s
		}
	}
	return 1
}

// Fit is what one CPU's PMU can count at once, for Group: a group whose
// members need more general-purpose counters than that is never scheduled.
type Fit struct {
	// Counters is the general-purpose counters a group may use; 0 is no
	// limit.
	Counters int
	// Free tells the events that take none of them: those on fixed
	// counters (instructions and cycles on Intel), PERF_METRICS' topdown
	// events, Arm's cycle counter. nil: every event takes one.
	Free func(counter.Spec) bool
	// Soft tells the events that never wait for a counter and are read
	// with the CPU's software group already (software, msr, tracepoints);
	// nil: PERF_TYPE_SOFTWARE.
	Soft func(counter.Spec) bool
}

func (f Fit) soft(sp counter.Spec) bool {
	if f.Soft != nil {
		return f.Soft(sp)
	}
	return sp.Attr.Type == unix.PERF_TYPE_SOFTWARE
}

// need is the general-purpose counters members take together.
func (f Fit) need(specs []counter.Spec, members []int) int {
	n := 0
	for _, m := range members {
		if !f.soft(specs[m]) && (f.Free == nil || !f.Free(specs[m])) {
			n++
		}
	}
	return n
}

// Group puts the operands of each ratio of defs into one named perf group
// (counter.Spec.Group) per CPU, so that all are counted over the same time
// and scaled alike. Ratios that share an operand share the group (ipc and
// cpi are one group of instructions and cycles), which stays as small as
// the ratios allow. Software operands only need nothing: the software
// events of a CPU are one group already. Nor does a ratio over Elapsed:
// its denominator is no counter, and its numerator's events are often on
// several PMUs (one per memory controller), which no perf group can span.
func Group(specs []counter.Spec, defs []Def) { GroupFit(specs, defs, Fit{}) }

// GroupFit is Group within fit: ratios are taken in defs order, and one
// whose operands, with the groups they already belong to, would need more
// counters than fit allows is left out of a group; its operands are then
// counted where they are (alone, or in another ratio's group), each
// multiplexed and scaled by its own time running. apart says, for each
// such ratio, one line for the log and --check.
func GroupFit(specs []counter.Spec, defs []Def, fit Fit) (apart []string) {
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	// Union-find over spec indexes; of collects the ratios of each set,
	// in the members of each root.
	parent := make([]int, len(specs))
	in := make([][]int, len(specs))
	for i := range parent {
		parent[i] = i
		in[i] = []int{i}
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	of := map[int][]string{}
	// A name whose earlier definition has all its operands is served by
	// that one (Select): a later one must not claim counters.
	complete := map[string]bool{}
	// fitUnit puts the events of terms, and the first of den's, in one
	// group with the groups they already belong to, if they fit.
	fitUnit := func(name string, terms []string, den string) (apart []string) {
		var members []int
		for _, term := range terms {
			members = append(members, match(term, names)...)
		}
		if den != "" {
			if evs := match(den, names); len(evs) > 0 {
				members = append(members, evs[0])
			}
		}
		slices.Sort(members)
		members = slices.Compact(members)
		if len(members) < 2 || allSoft(specs, members, fit) {
			return nil
		}
		var union []int
		var roots []int
		for _, m := range members {
			if r := find(m); !slices.Contains(roots, r) {
				roots = append(roots, r)
				union = append(union, in[r]...)
			}
		}
		if n := fit.need(specs, union); fit.Counters > 0 && n > fit.Counters {
			return []string{fmt.Sprintf("ratio %q: its operands would need %d counters in one group, the PMU has %d; they are counted apart, each multiplexed and scaled by its own time running",
				name, n, fit.Counters)}
		}
		r := roots[0]
		for _, rm := range roots[1:] {
			parent[rm] = r
			in[r] = append(in[r], in[rm]...)
			in[rm] = nil
			of[r] = append(of[r], of[rm]...)
			delete(of, rm)
		}
		if !slices.Contains(of[r], name) {
			of[r] = append(of[r], name)
		}
		return nil
	}
	for _, d := range defs {
		if d.Den == Elapsed || complete[d.Name] {
			continue
		}
		all := true
		for _, term := range d.Num {
			all = all && len(match(term, names)) > 0
		}
		if len(match(d.Den, names)) == 0 {
			continue
		}
		complete[d.Name] = all
		if d.Compound == nil {
			apart = append(apart, fitUnit(d.Name, d.Num, d.Den)...)
			continue
		}
		// Each group of its own name: a perf group is the specs of one
		// Group name.
		for k, unit := range d.units() {
			name := d.Name
			if k > 0 {
				name += "#" + strconv.Itoa(k+1)
			}
			apart = append(apart, fitUnit(name, unit, "")...)
		}
	}
	for i := range specs {
		if r := find(i); len(of[r]) > 0 {
			specs[i].Group = strings.Join(of[r], "+")
		}
	}
	return apart
}

func allSoft(specs []counter.Spec, members []int, fit Fit) bool {
	for _, m := range members {
		if !fit.soft(specs[m]) {
			return false
		}
	}
	return true
}

// Formula is the ratio as served, with the events its terms matched and
// their weights: "(uncore_imc_0.cas_count_read × 64 + …) / duration_time × 1e+09".
func (c *Chosen) Formula(set *counter.Set) string {
	if c.Compound != nil {
		return c.Compound.formula(c.Scale, func(op string) string {
			var evs []string
			for j, ev := range c.NumEv {
				if c.Num[c.Term[j]] == op {
					evs = append(evs, weighted(set.Name(ev), c.NumW[j], len(evs) == 0))
				}
			}
			if len(evs) > 1 {
				return "(" + strings.Join(evs, " ") + ")"
			}
			return strings.Join(evs, " ")
		})
	}
	terms := make([]string, len(c.NumEv))
	for j, ev := range c.NumEv {
		terms[j] = weighted(set.Name(ev), c.NumW[j], j == 0)
	}
	s := strings.Join(terms, " ")
	if len(terms) > 1 {
		s = "(" + s + ")"
	}
	den := c.Den
	if c.DenEv >= 0 {
		den = set.Name(c.DenEv)
	}
	s += " / " + den
	if c.Scale != 1 {
		s += fmt.Sprintf(" × %g", c.Scale)
	}
	return s
}
