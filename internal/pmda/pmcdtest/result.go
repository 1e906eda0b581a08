package pmcdtest

import (
	"encoding/binary"
	"fmt"
	"math"

	"perfevent/internal/pdu"
)

// Result is a decoded RESULT: one Set per PMID asked for, in the order
// asked.
type Result struct {
	// Flags carries the agent's state-change flags (pdu.StateNamesChange,
	// pdu.StateLabelChange), sent in the timestamp's seconds word.
	Flags int32
	Sets  []Set
}

// Set is the values of one PMID.
type Set struct {
	PMID pdu.PMID
	// NumVal is the number of values, or a negative pdu.Err for the
	// metric (see Err).
	NumVal int32
	// ValFmt is pdu.ValInsitu (32-bit values in the set itself) or a
	// pointer format (values in blocks that carry their type).
	ValFmt int32
	Values []Value
}

// Err returns the set's error (pdu.ErrPMID, pdu.ErrAgain, ...), or nil
// when it has values or none.
func (s Set) Err() error {
	if s.NumVal < 0 {
		return pdu.Err(s.NumVal)
	}
	return nil
}

// Map returns the set's values by instance id, as Float64 decodes them; a
// singular metric's one value is under pdu.InNull.
func (s Set) Map() map[int32]float64 {
	m := make(map[int32]float64, len(s.Values))
	for _, v := range s.Values {
		m[v.Inst] = v.Float64()
	}
	return m
}

// Insts returns the instance ids of the set's values, in order.
func (s Set) Insts() []int32 {
	ids := make([]int32, len(s.Values))
	for i, v := range s.Values {
		ids[i] = v.Inst
	}
	return ids
}

// Value is one instance's value.
type Value struct {
	pdu.Value
	insitu bool
}

// Float64 returns a numeric value as a float64. An in-situ value is a
// 32-bit one whose sign only the descriptor knows: it is read as an int32
// (Insitu holds the bits, for an unsigned metric). A block is read as its
// type says. A string or aggregate gives NaN.
func (v Value) Float64() float64 {
	if v.insitu {
		return float64(int32(v.Insitu))
	}
	switch v.VType {
	case pdu.ValueInt64, pdu.ValueUint64, pdu.ValueDouble:
		if len(v.Block) != 8 {
			return math.NaN()
		}
		u := binary.BigEndian.Uint64(v.Block)
		switch v.VType {
		case pdu.ValueInt64:
			return float64(int64(u))
		case pdu.ValueUint64:
			return float64(u)
		}
		return math.Float64frombits(u)
	case pdu.ValueFloat:
		if len(v.Block) != 4 {
			return math.NaN()
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(v.Block)))
	case pdu.ValueInt32, pdu.ValueUint32:
		if len(v.Block) != 4 {
			return math.NaN()
		}
		u := binary.BigEndian.Uint32(v.Block)
		if v.VType == pdu.ValueInt32 {
			return float64(int32(u))
		}
		return float64(u)
	}
	return math.NaN()
}

// String returns a string value without its terminating NUL; other values
// in their Float64 form.
func (v Value) String() string {
	if !v.insitu && v.VType == pdu.ValueString {
		b := v.Block
		if n := len(b); n > 0 && b[n-1] == 0 {
			b = b[:n-1]
		}
		return string(b)
	}
	return fmt.Sprint(v.Float64())
}

// Fetch asks for the current values of pmids. The reply must have one set
// per PMID, in order; a metric's own failure is its set's Err, a failure of
// the whole fetch the error returned.
func (c *Client) Fetch(pmids ...pdu.PMID) (*Result, error) {
	p, err := c.Ask(c.b.Fetch(c.from, 0, pmids), pdu.TypeResult)
	if err != nil {
		return nil, err
	}
	var raw pdu.Result
	if err := p.Result(&raw); err != nil {
		return nil, err
	}
	if len(raw.Sets) != len(pmids) {
		return nil, fmt.Errorf("RESULT has %d sets for %d PMIDs", len(raw.Sets), len(pmids))
	}
	r := &Result{Flags: raw.Flags, Sets: make([]Set, len(raw.Sets))}
	for i, s := range raw.Sets {
		if s.PMID != pmids[i] {
			return nil, fmt.Errorf("RESULT set %d is %s, want %s", i, s.PMID, pmids[i])
		}
		out := Set{PMID: s.PMID, NumVal: s.NumVal, ValFmt: s.ValFmt, Values: make([]Value, len(s.Values))}
		for j, v := range s.Values {
			out.Values[j] = Value{Value: v, insitu: s.ValFmt == pdu.ValInsitu}
		}
		r.Sets[i] = out
	}
	return r, nil
}
