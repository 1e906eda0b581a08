package pdu

import (
	"strings"
	"testing"
)

func TestCheckLabelName(t *testing.T) {
	for name, want := range map[string]string{
		"cpu":                    "",
		"Agent_2":                "",
		strings.Repeat("a", 254): "",
		"":                       `label name "" must have 1..254 bytes`,
		strings.Repeat("a", 255): "must have 1..254 bytes",
		"cpu-0":                  `label name "cpu-0": only [A-Za-z0-9_] are allowed`,
		"ün":                     "only [A-Za-z0-9_] are allowed",
	} {
		err := CheckLabelName(name)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckLabelName(%.20q) = %v, want %q", name, err, want)
		}
		// The []byte form, used on PDUs, judges alike.
		if errB := CheckLabelName([]byte(name)); (errB == nil) != (err == nil) {
			t.Errorf("CheckLabelName([]byte(%.20q)) = %v, but the string form gives %v", name, errB, err)
		}
	}
}
