package pmu

import (
	"fmt"
	"strconv"
	"strings"
)

// Term is one "name=value" item of a sysfs event description or of perf's
// pmu/.../ syntax.
type Term struct {
	Name  string
	Value uint64
	// Param marks "name=?": the value must be supplied by the user
	// (hv_24x7 and hv_gpci events use this for chip, core, domain ...).
	Param bool
}

// ParseTerms parses a term list such as "event=0xcd,umask=0x1,ldlat=3".
// A bare name is a flag and means 1 ("edge" is "edge=1"), as documented in
// the kernel's sysfs-bus-event_source-devices-events ABI.
func ParseTerms(text string) ([]Term, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("empty term list")
	}
	var terms []Term
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		name, val, hasVal := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("empty term in %q", text)
		}
		t := Term{Name: name, Value: 1}
		if hasVal {
			val = strings.TrimSpace(val)
			if val == "?" {
				t.Param, t.Value = true, 0
			} else {
				v, err := strconv.ParseUint(val, 0, 64)
				if err != nil {
					return nil, fmt.Errorf("term %s: value %q is not a number", name, val)
				}
				t.Value = v
			}
		}
		terms = append(terms, t)
	}
	return terms, nil
}
