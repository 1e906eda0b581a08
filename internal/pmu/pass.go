package pmu

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// A pass is one reading of the configuration against sysfs: at start-up,
// at each reload, and at each rebuild after CPUs go offline or come back.
// During a pass each PMU's directory is read once. Without it a
// configuration of N events on one PMU read that PMU N times, formats and
// every event with its companions each time: 2.5 ms per raw core event on
// the skylake test tree.
//
// Nothing is kept from one pass to the next. A reload must see a PMU that
// appeared or went away, a hotplug rebuild the cpumasks that the kernel
// moved off an offlined CPU, so every pass reads sysfs afresh.
type pass struct {
	pmus      map[string]pmuRead
	types     map[string]typeRead
	tps       map[string]tpRead // tracepoint ids, by root/subsys/event
	tpRoot    *rootRead
	resolved  map[string]resolveRead // by name and options; see passResolve
	names     []string
	namesErr  error
	namesRead bool
}

type resolveRead struct {
	ev  Event
	err error
}

type pmuRead struct {
	p   *PMU
	err error
}

type typeRead struct {
	s   string
	err error
}

type tpRead struct {
	id    uint64
	found bool
	err   error
}

type rootRead struct {
	root    string
	mounted bool
}

// Pass starts a pass; end finishes it. Until then, and until another pass
// starts, lookups of the same PMU share one read of its directory, and the
// PMU returned must not be changed. Passes do not nest: a pass that starts
// while another runs replaces it, so both use reads no older than the
// later one's start. Outside a pass every lookup reads sysfs.
func (fs *FS) Pass() (end func()) {
	p := &pass{pmus: map[string]pmuRead{}, types: map[string]typeRead{}, tps: map[string]tpRead{}, resolved: map[string]resolveRead{}}
	fs.passMu.Lock()
	fs.pass = p
	fs.passMu.Unlock()
	return func() {
		fs.passMu.Lock()
		if fs.pass == p {
			fs.pass = nil
		}
		fs.passMu.Unlock()
	}
}

// current is the pass under way, or nil.
func (fs *FS) current() *pass {
	fs.passMu.Lock()
	defer fs.passMu.Unlock()
	return fs.pass
}

// cachedPMU is PMU's cache: during a pass a PMU is read once. The lock is
// not held while sysfs is read: two goroutines that ask for the same PMU
// at once may both read it, and the first read is kept.
func (fs *FS) cachedPMU(name string, read func(string) (*PMU, error)) (*PMU, error) {
	p := fs.current()
	if p == nil {
		return read(name)
	}
	r := memo(&fs.passMu, p.pmus, name, func() pmuRead {
		pm, err := read(name)
		return pmuRead{pm, err}
	})
	return r.p, r.err
}

// typeText is the text of PMU name's type file, read once per pass. Its
// path is joined only for a read: every tracepoint configured asks for
// the tracepoint PMU's type.
func (fs *FS) typeText(name string) (string, error) {
	p := fs.current()
	if p == nil {
		return readTrimmed(filepath.Join(fs.devicesDir(), name, "type"))
	}
	r := memo(&fs.passMu, p.types, name, func() typeRead {
		s, err := readTrimmed(filepath.Join(fs.devicesDir(), name, "type"))
		return typeRead{s, err}
	})
	return r.s, r.err
}

// memo returns m[key], from read the first time; mu guards m, and is not
// held during read.
func memo[V any](mu *sync.Mutex, m map[string]V, key string, read func() V) V {
	mu.Lock()
	v, ok := m[key]
	mu.Unlock()
	if ok {
		return v
	}
	v = read()
	mu.Lock()
	defer mu.Unlock()
	if first, ok := m[key]; ok {
		return first
	}
	m[key] = v
	return v
}

// typeOf is PMU name's perf_event_attr type, read once per pass.
func (fs *FS) typeOf(name string) (uint32, bool) {
	s, err := fs.typeText(name)
	if err != nil {
		return 0, false
	}
	t, err := strconv.ParseUint(s, 0, 32)
	return uint32(t), err == nil
}

// cachedNames is PMUNames' cache.
func (fs *FS) cachedNames(read func() ([]string, error)) ([]string, error) {
	p := fs.current()
	if p == nil {
		return read()
	}
	return fs.passNames(p, read)
}

// passNames is pass p's listing of the PMUs, read the first time; the
// slice is shared, not to be changed.
func (fs *FS) passNames(p *pass, read func() ([]string, error)) ([]string, error) {
	fs.passMu.Lock()
	done, names, err := p.namesRead, p.names, p.namesErr
	fs.passMu.Unlock()
	if done {
		return names, err
	}
	names, err = read()
	fs.passMu.Lock()
	if p.namesRead {
		names, err = p.names, p.namesErr
	} else {
		p.names, p.namesErr, p.namesRead = names, err, true
	}
	fs.passMu.Unlock()
	return names, err
}

// hasPMU reports whether sysfs has a PMU directory of that name, a plain
// path element. During a pass the pass's one listing of the devices
// directory answers: a configuration's dynamic names and the metric
// catalog's operands each asked with a stat, several for a name of a PMU
// that is not there (cpu.cycles in a guest), and those stats were most
// of resolving them. Outside a pass, or when the directory cannot be
// listed, a stat answers.
func (fs *FS) hasPMU(name string) bool {
	if p := fs.current(); p != nil {
		if names, err := fs.passNames(p, fs.readPMUNames); err == nil {
			_, ok := slices.BinarySearch(names, name)
			return ok
		}
	}
	_, err := os.Stat(fs.PMUDir(name))
	return err == nil
}

// passTracingRoot is tracingRoot, looked for once per pass.
func (fs *FS) passTracingRoot() (string, bool) {
	p := fs.current()
	if p == nil {
		return fs.tracingRoot()
	}
	fs.passMu.Lock()
	r := p.tpRoot
	fs.passMu.Unlock()
	if r == nil {
		r = &rootRead{}
		r.root, r.mounted = fs.tracingRoot()
		fs.passMu.Lock()
		p.tpRoot = r
		fs.passMu.Unlock()
	}
	return r.root, r.mounted
}

// passTracepointID is tracepointID, read once per pass: the agent's plan
// and the C agent's numbering resolve the same tracepoints.
func (fs *FS) passTracepointID(root, subsys, event string) (uint64, bool, error) {
	p := fs.current()
	if p == nil {
		id, _, found, err := fs.tracepointID(root, subsys, event)
		return id, found, err
	}
	r := memo(&fs.passMu, p.tps, root+"/"+subsys+"/"+event, func() tpRead {
		id, _, found, err := fs.tracepointID(root, subsys, event)
		return tpRead{id, found, err}
	})
	return r.id, r.found, r.err
}

// passResolve is resolve, once per pass for a name and options: the
// configuration, the metric catalog's operands and the C agent's
// numbering resolve many of the same names, each through sysfs and
// libpfm4's tables. The Event's CPUs are the caller's own.
func (fs *FS) passResolve(name string, o Options) (Event, error) {
	p := fs.current()
	if p == nil || o.Params != nil {
		return fs.resolve(name, o)
	}
	key := name + "\x00" + strconv.FormatUint(o.RawCode, 16) + "\x00" + strconv.FormatBool(o.HasRawCode)
	r := memo(&fs.passMu, p.resolved, key, func() resolveRead {
		ev, err := fs.resolve(name, o)
		return resolveRead{ev, err}
	})
	ev := r.ev
	ev.CPUs = slices.Clone(ev.CPUs)
	return ev, r.err
}
