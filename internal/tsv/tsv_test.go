package tsv

import (
	"slices"
	"testing"
)

// Split fills the fields it finds and counts one more than there is room
// for, without allocating.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		line string
		n    int
		cols []string
	}{
		{"", 1, []string{"", "", ""}},
		{"a", 1, []string{"a", "", ""}},
		{"a\t\tc", 3, []string{"a", "", "c"}},
		{"a\tb\tc\t", 4, []string{"a", "b", "c"}},
		{"a\tb\tc\td\te", 4, []string{"a", "b", "c"}},
	} {
		var cols [3]string
		if n := Split(tc.line, cols[:]); n != tc.n || !slices.Equal(cols[:], tc.cols) {
			t.Errorf("Split(%q) = %d %q, want %d %q", tc.line, n, cols, tc.n, tc.cols)
		}
	}
	var cols [13]string
	if n := testing.AllocsPerRun(10, func() { Split("E\tname\t0x1\t0\t0", cols[:]) }); n != 0 {
		t.Errorf("Split makes %v objects, want 0", n)
	}
}
