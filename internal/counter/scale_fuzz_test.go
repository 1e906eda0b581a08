package counter_test

import (
	"math/big"
	"testing"

	"perfevent/internal/counter"
)

// FuzzScale checks the 128-bit arithmetic against math/big.
func FuzzScale(f *testing.F) {
	f.Add(uint64(1000), uint64(100), uint64(50))
	f.Add(uint64(1)<<63, uint64(1)<<40, uint64(1)<<39)
	f.Add(^uint64(0), ^uint64(0), ^uint64(0)-1)
	f.Fuzz(func(t *testing.T, raw, enabled, running uint64) {
		got := counter.Scale(raw, enabled, running)
		if running == 0 || running >= enabled {
			if got != raw {
				t.Fatalf("Scale(%d, %d, %d) = %d, want raw unscaled", raw, enabled, running, got)
			}
			return
		}
		want := new(big.Int).SetUint64(raw)
		want.Mul(want, new(big.Int).SetUint64(enabled))
		want.Quo(want, new(big.Int).SetUint64(running))
		if !want.IsUint64() {
			if got != raw {
				t.Fatalf("Scale(%d, %d, %d) = %d, want raw when the result overflows", raw, enabled, running, got)
			}
			return
		}
		if got != want.Uint64() {
			t.Fatalf("Scale(%d, %d, %d) = %d, want %d", raw, enabled, running, got, want.Uint64())
		}
	})
}
