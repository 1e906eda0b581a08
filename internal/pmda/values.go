package pmda

import (
	"fmt"

	"perfevent/internal/pdu"
)

// ValueWriter receives one metric's values during a fetch. Instances the
// client's profile excludes are dropped silently, so callers may write
// every instance; Want lets them skip the work instead. Singular metrics
// use the instance pdu.InNull.
//
// The method must match the metric's type (Uint64 for PM_TYPE_U64 and so
// on); a mismatch makes the metric answer PM_ERR_TYPE and is logged.
type ValueWriter struct {
	b    *pdu.Builder
	prof *pdu.Profile
	m    *Metric
	err  error
	n    int
}

func (w *ValueWriter) reset(b *pdu.Builder, m *Metric, prof *pdu.Profile) {
	w.b, w.m, w.prof, w.err, w.n = b, m, prof, nil, 0
}

// Want reports whether the client's profile selects inst.
func (w *ValueWriter) Want(inst int32) bool {
	if w.m.Desc.InDom == pdu.InDomNull {
		return inst == pdu.InNull
	}
	return w.prof.In(w.m.Desc.InDom, inst)
}

// Len is the number of values written so far.
func (w *ValueWriter) Len() int { return w.n }

// TypeError reports a value written with the wrong ValueWriter method.
type TypeError struct {
	Metric string
	Want   pdu.ValueType
	Got    pdu.ValueType
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("metric %s has type %s but was given a %s value", e.Metric, e.Want, e.Got)
}

// InstError reports an instance id that cannot belong to the metric.
type InstError struct {
	Metric string
	Inst   int32
}

func (e *InstError) Error() string {
	return fmt.Sprintf("metric %s: instance %d is not valid here", e.Metric, e.Inst)
}

func (w *ValueWriter) accept(inst int32, t pdu.ValueType) bool {
	if w.err != nil {
		return false
	}
	if w.m.Desc.Type != t {
		w.err = &TypeError{w.m.Name, w.m.Desc.Type, t}
		return false
	}
	if (w.m.Desc.InDom == pdu.InDomNull) != (inst == pdu.InNull) {
		w.err = &InstError{w.m.Name, inst}
		return false
	}
	if inst != pdu.InNull && !w.prof.In(w.m.Desc.InDom, inst) {
		return false
	}
	w.n++
	return true
}

// Int32 writes a value of a PM_TYPE_32 metric.
func (w *ValueWriter) Int32(inst int32, v int32) {
	if w.accept(inst, pdu.ValueInt32) {
		w.b.AddInsitu(inst, uint32(v))
	}
}

// Uint32 writes a value of a PM_TYPE_U32 metric.
func (w *ValueWriter) Uint32(inst int32, v uint32) {
	if w.accept(inst, pdu.ValueUint32) {
		w.b.AddInsitu(inst, v)
	}
}

// Int64 writes a value of a PM_TYPE_64 metric.
func (w *ValueWriter) Int64(inst int32, v int64) {
	if w.accept(inst, pdu.ValueInt64) {
		w.b.AddInt64(inst, v)
	}
}

// Uint64 writes a value of a PM_TYPE_U64 metric.
func (w *ValueWriter) Uint64(inst int32, v uint64) {
	if w.accept(inst, pdu.ValueUint64) {
		w.b.AddUint64(inst, v)
	}
}

// Float writes a value of a PM_TYPE_FLOAT metric.
func (w *ValueWriter) Float(inst int32, v float32) {
	if w.accept(inst, pdu.ValueFloat) {
		w.b.AddFloat(inst, v)
	}
}

// Double writes a value of a PM_TYPE_DOUBLE metric.
func (w *ValueWriter) Double(inst int32, v float64) {
	if w.accept(inst, pdu.ValueDouble) {
		w.b.AddDouble(inst, v)
	}
}

// String writes a value of a PM_TYPE_STRING metric.
func (w *ValueWriter) String(inst int32, s string) {
	if w.accept(inst, pdu.ValueString) {
		w.b.AddString(inst, s)
	}
}
