package pmda

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// canonical writes the same bytes as json.Marshal, whether plainJSON
// writes them or leaves them to it.
func TestCanonicalIsJSONMarshal(t *testing.T) {
	sets := []Labels{
		{"cpu": 3},
		{"cpu": 0, "socket": 1},
		{"device_type": "cpu", "indom_name": "per cpu"},
		{"agent": "perfevent"},
		{"cgroup": "/system.slice/a b.service"},
		{"z": int32(-7), "a": int64(1 << 40), "m": uint32(1 << 31)},
		{"html": "<b>&</b>"},
		{"quote": `say "hi"`, "back": `a\b`},
		{"ctl": "tab\there", "nl": "a\nb"},
		{"utf8": "é", "bad": "\xff", "sep": "\u2028"},
		{"f": 1.5, "b": true, "nil": nil, "list": []int{1, 2}},
		{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		l := Labels{}
		for range 1 + r.IntN(10) {
			k := string(rune('a' + r.IntN(26)))
			switch r.IntN(4) {
			case 0:
				l[k] = r.IntN(1 << 20)
			case 1:
				l[k] = int32(r.Int32()) - 1<<30
			case 2:
				b := make([]byte, r.IntN(12))
				for i := range b {
					b[i] = byte(0x10 + r.IntN(0x80))
				}
				l[k] = string(b)
			default:
				l[k] = r.Float64()
			}
		}
		sets = append(sets, l)
	}
	plain := 0
	for _, l := range sets {
		want, err := json.Marshal(map[string]any(l))
		if err != nil {
			t.Fatal(err)
		}
		got, err := canonical(l)
		if err != nil || string(got) != string(want) {
			t.Errorf("canonical(%#v) = %s %v, want %s", l, got, err, want)
		}
		if _, ok := appendPlainJSON(nil, l); ok {
			plain++
		}
	}
	// Of equal bytes, canonicalLike gives back the slice it was given.
	like, _ := canonical(Labels{"device_type": "cpu", "indom_name": "per cpu"})
	if got, err := canonicalLike(Labels{"indom_name": "per cpu", "device_type": "cpu"}, like); err != nil || &got[0] != &like[0] {
		t.Errorf("canonicalLike made %s anew (%v)", got, err)
	}
	if got, _ := canonicalLike(Labels{"device_type": "cpu"}, like); string(got) != `{"device_type":"cpu"}` {
		t.Errorf("canonicalLike of other labels = %s", got)
	}
	if plain < 10 {
		t.Errorf("plainJSON wrote only %d of %d label sets", plain, len(sets))
	}
}
