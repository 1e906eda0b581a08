package ratio

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Term is W × one operand: an event term as Def.Num spells them.
type Term struct {
	W  float64
	Op string
}

// Linear is the sum of its terms.
type Linear []Term

// Product is C × the product of its factors.
type Product struct {
	C       float64
	Factors []Linear
}

// Compound is a ratio that no one linear sum over one event expresses: a
// vendor's product of two ratios, plus a third, or a ratio with a ratio
// in its denominator (Intel's Memory_Bound), put over one common
// denominator. Its value is Scale × Σ Num / Σ Den over the increases of
// its operands in one interval, per instance; the whole machine's is the
// same formula over the increases summed over the instances, as perf stat
// -a computes a metric from its events' totals.
type Compound struct {
	Num, Den []Product
	// Groups are the sets of operands to count in one perf group each:
	// the operands of each of the vendor's factors, each exact within its
	// own group, where all of them together would not fit the PMU's
	// counters. nil: all of them in one group.
	Groups [][]string
}

// NewCompound is the ratio named name whose value is scale × c.Num /
// c.Den: Def.Num is every operand of c, once, those of the denominator
// first, and Def.Den the denominator's first, which leads its group.
func NewCompound(name string, c Compound, scale float64) Def {
	d := Def{Name: name, Compound: &c, Scale: scale}
	for _, p := range slices.Concat(c.Den, c.Num) {
		for _, f := range p.Factors {
			for _, t := range f {
				if !slices.Contains(d.Num, t.Op) {
					d.Num = append(d.Num, t.Op)
				}
			}
		}
	}
	if len(d.Num) > 0 {
		d.Den = d.Num[0]
	}
	return d
}

// check reports what is wrong with a compound d.
func (c *Compound) check(d *Def) error {
	switch {
	case len(c.Num) == 0 || len(c.Den) == 0:
		return fmt.Errorf("ratio %q needs a numerator and a denominator", d.Name)
	case len(d.Weights) > 0 || d.Bytes || d.KernelScale || d.Den == Elapsed:
		return fmt.Errorf("ratio %q: a compound ratio has no weights, bytes, kernel scale or elapsed time", d.Name)
	}
	for _, p := range slices.Concat(c.Num, c.Den) {
		if len(p.Factors) == 0 || math.IsNaN(p.C) || math.IsInf(p.C, 0) {
			return fmt.Errorf("ratio %q: a product %v with no factors or coefficient", d.Name, p)
		}
		for _, f := range p.Factors {
			if len(f) == 0 {
				return fmt.Errorf("ratio %q: an empty factor", d.Name)
			}
			for _, t := range f {
				if !slices.Contains(d.Num, t.Op) {
					return fmt.Errorf("ratio %q: operand %q is not among its terms", d.Name, t.Op)
				}
			}
		}
	}
	for _, g := range c.Groups {
		for _, op := range g {
			if !slices.Contains(d.Num, op) {
				return fmt.Errorf("ratio %q: group operand %q is not among its terms", d.Name, op)
			}
		}
	}
	return nil
}

// units are the operand sets of a compound ratio that GroupFit puts in
// one group each.
func (d *Def) units() [][]string {
	if d.Compound.Groups != nil {
		return d.Compound.Groups
	}
	return [][]string{d.Num}
}

// formula writes the compound ratio with each operand as name gives it.
func (c *Compound) formula(scale float64, name func(op string) string) string {
	num, den := poly(c.Num, name), poly(c.Den, name)
	// A sum needs parentheses on either side; a product only below.
	sum := func(ps []Product) bool {
		return len(ps) > 1 || len(ps[0].Factors) == 1 && len(ps[0].Factors[0]) > 1 && ps[0].C == 1
	}
	if sum(c.Num) {
		num = "(" + num + ")"
	}
	if sum(c.Den) || len(c.Den[0].Factors) > 1 || c.Den[0].C != 1 {
		den = "(" + den + ")"
	}
	s := num + " / " + den
	if scale != 1 {
		s += fmt.Sprintf(" × %g", scale)
	}
	return s
}

func poly(ps []Product, name func(op string) string) string {
	var b strings.Builder
	for k, p := range ps {
		factors := make([]string, len(p.Factors))
		for j, f := range p.Factors {
			terms := make([]string, len(f))
			for i, t := range f {
				terms[i] = weighted(name(t.Op), t.W, i == 0)
			}
			factors[j] = strings.Join(terms, " ")
			if len(f) > 1 && (len(p.Factors) > 1 || p.C != 1) {
				factors[j] = "(" + factors[j] + ")"
			}
		}
		b.WriteString(weighted(strings.Join(factors, " × "), p.C, k == 0))
		if k < len(ps)-1 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// compiled is a Compound with its operands as indexes into Def.Num, for
// evaluation without lookups.
type compiled struct{ num, den []cproduct }

type cproduct struct {
	c       float64
	factors [][]cterm
}

type cterm struct {
	op int
	w  float64
}

func compile(d *Def) *compiled {
	conv := func(ps []Product) []cproduct {
		out := make([]cproduct, len(ps))
		for k, p := range ps {
			out[k].c = p.C
			for _, f := range p.Factors {
				cf := make([]cterm, len(f))
				for i, t := range f {
					cf[i] = cterm{slices.Index(d.Num, t.Op), t.W}
				}
				out[k].factors = append(out[k].factors, cf)
			}
		}
		return out
	}
	return &compiled{conv(d.Compound.Num), conv(d.Compound.Den)}
}

func eval(ps []cproduct, x []float64) float64 {
	var sum float64
	for _, p := range ps {
		v := p.c
		for _, f := range p.factors {
			var l float64
			for _, t := range f {
				l += t.w * x[t.op]
			}
			v *= l
		}
		sum += v
	}
	return sum
}

// OfTerms is a compound ratio over one interval in which each term of
// Num increased by x[j] (its events' increases summed, weighed by NumW):
// false where the denominator is 0.
func (c *Chosen) OfTerms(x []float64) (float64, bool) {
	den := eval(c.poly.den, x)
	if den == 0 {
		return 0, false
	}
	return c.Scale * eval(c.poly.num, x) / den, true
}
