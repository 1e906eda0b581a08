package counter_test

import (
	"errors"
	"slices"
	"testing"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/logging"
)

// A Set built to replace another (a reload, a CPU that went offline or
// came back) continues the values of the counters both have, so that no
// instance appears to reset; a CPU never seen starts from zero, and one
// that comes back continues from where it froze.
func TestCarryContinuesValues(t *testing.T) {
	old, fake := newSet(t, sw("cpu-clock", 0, 0, 1), hw("cycles", 0, 0, 1), sw("faults", 2, 0, 1))
	fake.AddAll(1000, 10, 10)
	if v, _ := fetch(old, 0, 1, 2); !slices.Equal(v[0], []uint64{1000, 1000}) {
		t.Fatalf("old values %v", v)
	}

	// CPU 1 went offline and cpu2 is new: the rebuilt Set counts on cpu0
	// and cpu2; "faults" changed its attribute, "cycles" stays the same.
	s, fake2 := newSet(t, sw("cpu-clock", 0, 0, 2), hw("cycles", 0, 0, 2), sw("faults", 3, 0, 2))
	s.Carry(old)
	fake2.AddAll(5, 1, 1)
	v, _ := fetch(s, 0, 1, 2)
	for _, tc := range []struct {
		name string
		got  []uint64
		want []uint64
	}{
		{"cpu-clock", v[0], []uint64{1005, 5}},
		{"cycles", v[1], []uint64{1005, 5}},
		{"faults, whose attribute changed", v[2], []uint64{5, 5}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s on cpu0,cpu2: %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	// CPU 1 back: its value continues from where it froze, through the
	// Set that did not serve it; faults on cpu1 had another attribute.
	s3, fake3 := newSet(t, sw("cpu-clock", 0, 0, 1), hw("cycles", 0, 0, 1), sw("faults", 3, 0, 1))
	s3.Carry(s)
	fake3.AddAll(1, 1, 1)
	v, _ = fetch(s3, 0, 1, 2)
	for i, want := range [][]uint64{{1006, 1001}, {1006, 1001}, {6, 1}} {
		if !slices.Equal(v[i], want) {
			t.Errorf("%s on cpu0,cpu1 after cpu1 came back: %v, want %v", s3.Name(i), v[i], want)
		}
	}
	s.Carry(nil) // nothing to carry
	s.Carry(s)
}

// What the old Set counted after its last fetch is carried too: a reload
// or a hotplug rebuild loses no count.
func TestCarryTakesWhatCameSinceTheLastFetch(t *testing.T) {
	old, fake := newSet(t, sw("cpu-clock", 0, 0, 1))
	fake.AddAll(1000, 10, 10)
	fetch(old, 0)
	fake.AddAll(300, 10, 10) // counted, never fetched from old
	s, fake2 := newSet(t, sw("cpu-clock", 0, 0, 1))
	s.Carry(old)
	fake2.AddAll(5, 1, 1)
	if v, _ := fetch(s, 0); !slices.Equal(v[0], []uint64{1305, 1305}) {
		t.Errorf("cpu-clock after the rebuild: %v, want 1305 on both CPUs (1000 fetched, 300 not, 5 new)", v[0])
	}
}

// A read that starts failing tells ReadFailed once, like the log.
func TestReadFailedIsToldOnce(t *testing.T) {
	fake := countertest.New()
	calls := 0
	s, err := counter.New([]counter.Spec{sw("a", 0, 0, 1), hw("b", 0, 0, 1)}, counter.Config{
		Opener:     fake,
		Log:        logging.Discard,
		ReadFailed: func() { calls++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	fetch(s, 0, 1)
	fake.FailRead("a", 1, errors.New("gone"))
	fake.FailRead("b", 1, errors.New("gone"))
	for range 3 {
		fetch(s, 0, 1)
	}
	if calls != 2 {
		t.Errorf("ReadFailed called %d times, want 2 (the group on cpu1 and b on cpu1, once each)", calls)
	}
}
