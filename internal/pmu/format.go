package pmu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Field names the perf_event_attr word a format field lives in.
type Field uint8

const (
	Config  Field = iota // attr.config
	Config1              // attr.config1 (unix.PerfEventAttr.Ext1)
	Config2              // attr.config2 (unix.PerfEventAttr.Ext2)
	// Config3 exists in kernels since 6.3 but has no slot in
	// unix.PerfEventAttr, so fields in it are parsed and then refused when
	// an event uses them.
	Config3
)

func (f Field) String() string {
	switch f {
	case Config:
		return "config"
	case Config1:
		return "config1"
	case Config2:
		return "config2"
	case Config3:
		return "config3"
	}
	return fmt.Sprintf("Field(%d)", uint8(f))
}

// BitRange is an inclusive range of bit numbers, Lo <= Hi <= 63.
type BitRange struct{ Lo, Hi uint }

// Format is one file of a PMU's format directory: a named field and the
// bits it occupies, e.g. "umask" = config:8-15. A field may be split over
// several ranges ("config1:1,6-10,44"); values fill them low bits first,
// lowest range first, as the perf tool does.
type Format struct {
	Name   string
	Field  Field
	Ranges []BitRange // sorted by Lo, non-overlapping
}

// ParseFormat parses the contents of a format file such as "config:0-7" or
// "config1:1,6-10,44".
func ParseFormat(name, text string) (Format, error) {
	text = strings.TrimSpace(text)
	field, spec, ok := strings.Cut(text, ":")
	if !ok {
		return Format{}, fmt.Errorf("%q is not field:bits", text)
	}
	f := Format{Name: name}
	switch field {
	case "config":
		f.Field = Config
	case "config1":
		f.Field = Config1
	case "config2":
		f.Field = Config2
	case "config3":
		f.Field = Config3
	default:
		return Format{}, fmt.Errorf("unknown field %q (want config, config1, config2 or config3)", field)
	}
	for _, r := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		l, err := strconv.ParseUint(lo, 10, 8)
		if err != nil || l > 63 {
			return Format{}, fmt.Errorf("bad bit %q in %q", lo, text)
		}
		h := l
		if isRange {
			h, err = strconv.ParseUint(hi, 10, 8)
			if err != nil || h > 63 || h < l {
				return Format{}, fmt.Errorf("bad bit range %q in %q", r, text)
			}
		}
		f.Ranges = append(f.Ranges, BitRange{uint(l), uint(h)})
	}
	slices.SortFunc(f.Ranges, func(a, b BitRange) int { return int(a.Lo) - int(b.Lo) })
	for i := 1; i < len(f.Ranges); i++ {
		if f.Ranges[i].Lo <= f.Ranges[i-1].Hi {
			return Format{}, fmt.Errorf("overlapping bit ranges in %q", text)
		}
	}
	return f, nil
}

// Width is the number of bits the field holds.
func (f Format) Width() uint {
	var w uint
	for _, r := range f.Ranges {
		w += r.Hi - r.Lo + 1
	}
	return w
}

// Max is the largest value the field holds.
func (f Format) Max() uint64 {
	if w := f.Width(); w < 64 {
		return 1<<w - 1
	}
	return ^uint64(0)
}

// Place spreads v over the field's bits and returns the resulting word,
// to be ORed into the attr word named by f.Field. It fails when v does not
// fit; the caller names the event.
func (f Format) Place(v uint64) (uint64, error) {
	if v > f.Max() {
		return 0, fmt.Errorf("value %#x does not fit %s (%d bits, max %#x)", v, f, f.Width(), f.Max())
	}
	var word uint64
	for _, r := range f.Ranges {
		n := r.Hi - r.Lo + 1
		mask := ^uint64(0)
		if n < 64 {
			mask = 1<<n - 1
		}
		word |= (v & mask) << r.Lo
		if n < 64 {
			v >>= n
		} else {
			v = 0
		}
	}
	return word, nil
}

// String renders the format the way sysfs spells it.
func (f Format) String() string {
	var b strings.Builder
	b.WriteString(f.Name)
	b.WriteString("=")
	b.WriteString(f.Field.String())
	b.WriteString(":")
	for i, r := range f.Ranges {
		if i > 0 {
			b.WriteString(",")
		}
		if r.Lo == r.Hi {
			fmt.Fprintf(&b, "%d", r.Lo)
		} else {
			fmt.Fprintf(&b, "%d-%d", r.Lo, r.Hi)
		}
	}
	return b.String()
}
