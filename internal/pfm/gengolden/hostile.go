package main

import (
	"fmt"
	"strings"

	"perfevent/internal/pfm"
)

// hostilePMUs chooses the PMUs that get the hostile corpus: of each
// family, among the PMUs with events and a table of their own, the first
// three and the last in libpfm4's order (the oldest and, mostly, the
// newest models).
func hostilePMUs(arch string, pmus []*pfm.PMU) (map[string]bool, error) {
	byFamily := map[pfm.Family][]string{}
	seen := map[string]bool{}
	for _, h := range pmus {
		p, err := pfm.LoadArch(arch, h.Name)
		if err != nil {
			return nil, err
		}
		if key := tableKey(p); len(p.Events) > 0 && !seen[key] {
			seen[key] = true
			byFamily[p.Family] = append(byFamily[p.Family], p.Name)
		}
	}
	chosen := map[string]bool{}
	for _, names := range byFamily {
		for i, n := range names {
			if i < 3 || i == len(names)-1 {
				chosen[n] = true
			}
		}
	}
	return chosen, nil
}

// hostileNames is a deterministic corpus of names that a careless or
// malicious perfevent.conf could hold, for one PMU: mixed case, repeated
// and contradicting attributes, bad values, raw unit masks, '.' as the
// separator, names whose canonical form passes libpfm4's 255 bytes, and
// empty fields, each written after "PMU::". It is asked of the first, the middle and the last event
// and of the first event with unit masks.
func hostileNames(p *pfm.PMU) []string {
	var out, late []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	// A number too big for strtoull leaves errno at ERANGE, and
	// perf_raw's lookup reads errno without clearing it: every perf_raw
	// name after one would be "not found" in the oracle's process. They
	// go last, so that only they share it.
	addLate := func(format string, args ...any) { late = append(late, fmt.Sprintf(format, args...)) }
	picks := []int{0, len(p.Events) / 2, len(p.Events) - 1}
	for i := range p.Events {
		if len(p.Events[i].Umasks) > 0 {
			picks = append(picks, i)
			break
		}
	}
	seen := map[int]bool{}
	var intMod, boolMod string // a modifier of each kind the PMU has
	for _, m := range p.Modifiers {
		switch {
		case m.Type == pfm.ModInteger && intMod == "":
			intMod = m.Name
		case m.Type == pfm.ModBool && boolMod == "":
			boolMod = m.Name
		}
	}
	for _, i := range picks {
		if seen[i] {
			continue
		}
		seen[i] = true
		e := p.Events[i]
		n := e.Name
		add("%s", mixedCase(n))
		add("%s:U", n)
		add("%s:K=0", n)
		add("%s:u:u:u", n)
		add("%s:u=0:u=1:u=0", n)
		add("%s:u=0:u:u=0", n)
		add("%s:u=2", n)
		add("%s:u=yes", n)
		add("%s:u=T", n)
		add("%s:u=", n)
		add("%s:=1", n)
		add("%s:", n)
		add("%s::u", n)
		add("%s:u:", n)
		add("%s:precise=4", n)
		add("%s:precise=-1", n)
		add("%s:period=0", n)
		add("%s:freq=0", n)
		add("%s:period=1:freq=1", n)
		add("%s:period=0x10", n)
		add("%s:period=010", n)
		addLate("%s:period=99999999999999999999", n)
		add("%s:cpu=-1", n)
		add("%s:cpu=2147483646", n)
		add("%s:cpu=2147483647", n)
		add("%s.u", n)
		add("%s.k=0.u", n)
		add("%s u", n)
		add("%s,%s", n, n)
		add("%s", strings.Repeat(n, 300/len(n)+1))
		add("%s%s", n, strings.Repeat(":u", 70))
		add("%s%s", n, strings.Repeat(":excl", 65))
		add("%s:0x0", n)
		add("%s:0x1", n)
		add("%s:0xff", n)
		add("%s:0X1", n)
		add("%s:0x", n)
		add("%s:0xzz", n)
		add("%s:0x100000000", n)
		add("%s:0x1:0x2", n)
		if intMod != "" {
			add("%s:%s=", n, intMod)
			add("%s:%s=abc", n, intMod)
			add("%s:%s=0x", n, intMod)
			add("%s:%s=-1", n, intMod)
			add("%s:%s=1:%s=2", n, intMod, intMod)
			add("%s:%s=1:%s=1", n, intMod, intMod)
			add("%s:%s=256", n, intMod)
			add("%s:%s=4294967296", n, intMod)
			addLate("%s:%s=99999999999999999999", n, intMod)
			add("%s:%s", n, intMod)
			add("%s:%s", n, strings.ToUpper(intMod)+"=1")
			add("%s.%s=1", n, intMod)
		}
		if boolMod != "" {
			add("%s:%s=1:%s=0", n, boolMod, boolMod)
			add("%s:%s=n", n, boolMod)
			add("%s:%s=F", n, boolMod)
			add("%s:%s=10", n, boolMod)
		}
		if len(e.Umasks) > 0 {
			u0, ul := e.Umasks[0].Name, e.Umasks[len(e.Umasks)-1].Name
			add("%s:%s", mixedCase(n), strings.ToLower(u0))
			add("%s.%s", n, u0)
			add("%s.%s.u", n, u0)
			add("%s:%s:%s", n, u0, u0)
			add("%s:%s:%s:%s", n, u0, u0, u0)
			add("%s:%s:%s", n, u0, ul)
			add("%s:%s:%s", n, ul, u0)
			add("%s:%s=1", n, u0)
			add("%s:%s:0x1", n, u0)
			add("%s:0x1:%s", n, u0)
			add("%s:%s:u=0:u=1", n, u0)
			if intMod != "" {
				add("%s:%s:%s=1:%s=2", n, u0, intMod, intMod)
			}
			// every unit mask at once, which where groups combine makes
			// a canonical name longer than libpfm4's 255 bytes
			var all []string
			for _, u := range e.Umasks {
				all = append(all, u.Name)
			}
			add("%s:%s", n, strings.Join(all, ":"))
			add("%s:%s:u:k:h", n, strings.Join(all, ":"))
		}
	}
	return append(out, late...)
}

// hostilePrefixes are hostile names whose fault is in the PMU prefix.
func hostilePrefixes(p *pfm.PMU) []string {
	e := p.Events[0].Name
	return []string{mixedCase(p.Name) + "::" + e, "::" + e, p.Name + "::", p.Name + ":::" + e, p.Name + "::::" + e}
}

// mixedCase alternates the case of a name's letters: "InSt_rEtIrEd".
func mixedCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case i%2 == 0 && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case i%2 == 1 && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}
