package main

import (
	"fmt"
	"strconv"
	"strings"
)

// defaultLogSize keeps the agent's log and its .prev within 8 MiB: a
// day of reloads, reservations and cgroups coming and going takes a few
// hundred kilobytes once repeats are held back.
const defaultLogSize = 4 << 20

// minLogSize is the smallest cap -log-size takes, but for 0.
const minLogSize = 16 << 10

// byteSize is a flag's size in bytes: a number, or one with K, M or G
// (powers of 1024).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	t := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B")
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return fmt.Errorf("%q is not a size: use bytes, or a number with K, M or G", s)
	}
	*b = byteSize(v * mult)
	return nil
}
