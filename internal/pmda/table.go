package pmda

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"perfevent/internal/pdu"
)

// Labels is a label set: names ([A-Za-z0-9_]+) to JSON-encodable values.
type Labels map[string]any

// Metric is one metric the agent serves.
type Metric struct {
	Name    string   // full dotted name from the PMNS root, e.g. "perfevent.hwcounters.x.value"
	Desc    pdu.Desc // Desc.PMID identifies the metric; Desc.InDom must be in the table or InDomNull
	OneLine string   // one-line help
	Help    string   // long help
	// MakeHelp, when Help is "", makes the long help each time a client
	// asks for it: few ever do, and an agent with many metrics would
	// otherwise spend its start-up writing texts nobody reads.
	MakeHelp func() string
	Labels   Labels // item labels

	labels []byte // canonical JSON of Labels, or nil
}

// LongHelp is the metric's long help: Help, or what MakeHelp makes.
func (m *Metric) LongHelp() string {
	if m.Help == "" && m.MakeHelp != nil {
		return m.MakeHelp()
	}
	return m.Help
}

// Instance is one instance of an instance domain.
type Instance struct {
	ID     int32
	Name   string
	Labels Labels

	labels []byte
}

// InDom is an instance domain and its instances.
type InDom struct {
	InDom     pdu.InDom
	Instances []Instance
	OneLine   string
	Help      string
	Labels    Labels
	// Live, if set, holds the instances instead of Instances (which must
	// then be empty): a domain whose members come and go while the table
	// is served, such as one instance per cgroup. Clients learn of a
	// change as PCP's do from any agent: new ids in fetch results, and
	// the new list from the next instance request.
	Live *Instances

	labels []byte
	static instList
}

// instList is one version of an instance domain's members, indexed.
type instList struct {
	all  []Instance
	byID map[int32]int
}

// Instances is the changing member list of a dynamic InDom. Set swaps in
// a whole new list; requests already being answered keep the one they
// started with. Safe from any goroutine.
type Instances struct {
	cur atomic.Pointer[instList]
}

// NewInstances returns an empty live list.
func NewInstances() *Instances {
	l := &Instances{}
	l.cur.Store(&instList{})
	return l
}

// Set replaces the members. It checks them as NewTable checks a static
// domain's and keeps the previous list if they are not valid.
func (l *Instances) Set(in []Instance) error {
	list, err := indexInstances(append([]Instance(nil), in...))
	if err != nil {
		return err
	}
	l.cur.Store(&list)
	return nil
}

// Len is the number of members now.
func (l *Instances) Len() int { return len(l.cur.Load().all) }

// members is the list a request answers from.
func (d *InDom) members() *instList {
	if d.Live != nil {
		return d.Live.cur.Load()
	}
	return &d.static
}

// indexInstances checks instances (ids non-negative and unique, names
// non-empty and unique, labels valid) and indexes them.
func indexInstances(in []Instance) (instList, error) {
	list := instList{all: in, byID: make(map[int32]int, len(in))}
	names := make(map[string]bool, len(in))
	for j := range in {
		inst := &in[j]
		if inst.ID < 0 {
			return instList{}, fmt.Errorf("instance %q has negative id %d", inst.Name, inst.ID)
		}
		if inst.Name == "" {
			return instList{}, fmt.Errorf("instance %d has no name", inst.ID)
		}
		if _, dup := list.byID[inst.ID]; dup {
			return instList{}, fmt.Errorf("instance id %d used twice", inst.ID)
		}
		if names[inst.Name] {
			return instList{}, fmt.Errorf("instance name %q used twice", inst.Name)
		}
		list.byID[inst.ID], names[inst.Name] = j, true
		var err error
		if inst.labels, err = canonical(inst.Labels); err != nil {
			return instList{}, fmt.Errorf("labels of instance %q: %w", inst.Name, err)
		}
	}
	return list, nil
}

// TableSpec describes everything an agent serves. NewTable checks it and
// indexes it; the spec's slices must not be modified afterwards.
type TableSpec struct {
	Domain        int
	Metrics       []Metric
	InDoms        []InDom
	DomainLabels  Labels         // e.g. {"agent":"perfevent"}
	ClusterLabels map[int]Labels // by cluster number
	// Subtrees are the dynamic namespace roots pmcd forwards to this agent
	// (e.g. "perfevent.hwcounters"). They exist even while empty, so
	// that CHILD and TRAVERSE on them answer an empty list, not an error.
	Subtrees []string
}

// Table is an immutable, indexed TableSpec. Swap tables with Agent.SetTable.
type Table struct {
	domain        int
	metrics       []Metric
	byPMID        map[pdu.PMID]int
	names         map[pdu.PMID][]string
	indoms        []InDom
	byInDom       map[pdu.InDom]int
	domainLabels  []byte
	clusterLabels map[int][]byte
	root          *node
	nodes         []node // the block newNode takes nodes from
}

// node is one PMNS name component. Children keep insertion order so that
// listings follow the order the agent gave.
type node struct {
	name     string // component
	full     string // dotted name from the root
	leaf     bool
	dir      bool // a declared subtree or a prefix of another name
	pmid     pdu.PMID
	children []*node
	index    map[string]*node // by name, once there are more than indexFrom children
}

// indexFrom is how many children a node looks through before it indexes
// them: most nodes have a few (a counter's value and dutycycle), and a
// map each cost more to make than a look through them saves.
const indexFrom = 8

func (n *node) child(name string) *node {
	if n.index == nil {
		for _, c := range n.children {
			if c.name == name {
				return c
			}
		}
		return nil
	}
	return n.index[name]
}

// NewTable validates spec and builds the lookup structures.
func NewTable(spec TableSpec) (*Table, error) {
	t := &Table{
		domain:        spec.Domain,
		metrics:       spec.Metrics,
		byPMID:        make(map[pdu.PMID]int, len(spec.Metrics)),
		names:         make(map[pdu.PMID][]string, len(spec.Metrics)),
		indoms:        spec.InDoms,
		byInDom:       make(map[pdu.InDom]int, len(spec.InDoms)),
		clusterLabels: make(map[int][]byte, len(spec.ClusterLabels)),
		root:          &node{},
		// Enough for a leaf per metric and an interior node per two.
		nodes: make([]node, 0, 3*len(spec.Metrics)/2+len(spec.Subtrees)+8),
	}
	var err error
	if t.domainLabels, err = canonical(spec.DomainLabels); err != nil {
		return nil, fmt.Errorf("domain labels: %w", err)
	}
	for c, l := range spec.ClusterLabels {
		if t.clusterLabels[c], err = canonical(l); err != nil {
			return nil, fmt.Errorf("labels of cluster %d: %w", c, err)
		}
	}
	indexed := map[*Instance]instList{}
	var prevLabels []byte
	for i := range t.indoms {
		d := &t.indoms[i]
		if d.InDom == pdu.InDomNull {
			return nil, fmt.Errorf("instance domain #%d: PM_INDOM_NULL cannot have instances", i)
		}
		if _, dup := t.byInDom[d.InDom]; dup {
			return nil, fmt.Errorf("instance domain %s: defined twice", d.InDom)
		}
		t.byInDom[d.InDom] = i
		if d.labels, err = canonicalLike(d.Labels, prevLabels); err != nil {
			return nil, fmt.Errorf("labels of instance domain %s: %w", d.InDom, err)
		}
		prevLabels = d.labels
		if d.Live != nil && len(d.Instances) > 0 {
			return nil, fmt.Errorf("instance domain %s: has both static and live instances", d.InDom)
		}
		if len(d.Instances) > 0 {
			// Domains may share one instance list: it is indexed once.
			if l, ok := indexed[&d.Instances[0]]; ok && len(l.all) == len(d.Instances) {
				d.static = l
				continue
			}
		}
		if d.static, err = indexInstances(d.Instances); err != nil {
			return nil, fmt.Errorf("instance domain %s: %w", d.InDom, err)
		}
		if len(d.Instances) > 0 {
			indexed[&d.Instances[0]] = d.static
		}
	}
	for _, s := range spec.Subtrees {
		if _, err := t.insert(s, false, 0); err != nil {
			return nil, fmt.Errorf("subtree %q: %w", s, err)
		}
	}
	all := make([]string, len(t.metrics))
	for i := range t.metrics {
		m := &t.metrics[i]
		if _, err := t.insert(m.Name, true, m.Desc.PMID); err != nil {
			return nil, fmt.Errorf("metric %q: %w", m.Name, err)
		}
		if m.Desc.PMID == pdu.PMIDNull {
			return nil, fmt.Errorf("metric %q: PMID is PM_ID_NULL", m.Name)
		}
		if m.Desc.InDom != pdu.InDomNull {
			if _, ok := t.byInDom[m.Desc.InDom]; !ok {
				return nil, fmt.Errorf("metric %q: instance domain %s is not in the table", m.Name, m.Desc.InDom)
			}
		}
		if m.labels, err = canonical(m.Labels); err != nil {
			return nil, fmt.Errorf("labels of metric %q: %w", m.Name, err)
		}
		// One PMID may have several names (aliases), but one descriptor.
		if j, dup := t.byPMID[m.Desc.PMID]; dup {
			if t.metrics[j].Desc != m.Desc {
				return nil, fmt.Errorf("metric %q: PMID %s already belongs to %q with a different descriptor", m.Name, m.Desc.PMID, t.metrics[j].Name)
			}
		} else {
			t.byPMID[m.Desc.PMID] = i
		}
		// A PMID's first name is a slice of one array of them all, its
		// aliases (rare) a copy: not a slice made for every metric.
		if ns, ok := t.names[m.Desc.PMID]; ok {
			t.names[m.Desc.PMID] = append(ns, m.Name)
		} else {
			all[i] = m.Name
			t.names[m.Desc.PMID] = all[i : i+1 : i+1]
		}
	}
	return t, nil
}

// newNode is a node of the table's namespace, from a block of them: a
// table's nodes live and die together.
func (t *Table) newNode() *node {
	if len(t.nodes) == cap(t.nodes) {
		t.nodes = make([]node, 0, max(64, 2*cap(t.nodes)))
	}
	t.nodes = t.nodes[:len(t.nodes)+1]
	return &t.nodes[len(t.nodes)-1]
}

// insert adds a dotted name as a leaf or as an interior node.
func (t *Table) insert(name string, leaf bool, pmid pdu.PMID) (*node, error) {
	if name == "" {
		return nil, fmt.Errorf("empty name")
	}
	n := t.root
	// Each component and each node's full name are slices of name.
	for start := 0; start <= len(name); {
		end := strings.IndexByte(name[start:], '.')
		if end < 0 {
			end = len(name)
		} else {
			end += start
		}
		p := name[start:end]
		start = end + 1
		if p == "" {
			return nil, fmt.Errorf("empty component in name")
		}
		if n.leaf {
			return nil, fmt.Errorf("%q is a metric, so it cannot have children", n.full)
		}
		n.dir = true
		c := n.child(p)
		if c == nil {
			c = t.newNode()
			c.name, c.full = p, name[:end]
			n.children = append(n.children, c)
			switch {
			case n.index != nil:
				n.index[p] = c
			case len(n.children) > indexFrom:
				n.index = make(map[string]*node, 2*len(n.children))
				for _, c := range n.children {
					n.index[c.name] = c
				}
			}
		}
		n = c
	}
	if leaf {
		if n.leaf {
			return nil, fmt.Errorf("name defined twice")
		}
		if n.dir {
			return nil, fmt.Errorf("name is also a subtree")
		}
		n.leaf, n.pmid = true, pmid
	} else if n.leaf {
		return nil, fmt.Errorf("name is a metric, not a subtree")
	} else {
		n.dir = true
	}
	return n, nil
}

// canonical encodes labels as PCP wants them: compact JSON with sorted
// keys (encoding/json sorts map keys). Names are checked here, so that a
// bad label is reported when the table is built, not at request time.
func canonical(l Labels) ([]byte, error) {
	return canonicalLike(l, nil)
}

// canonicalLike is canonical, returning like itself when the encoding is
// the same bytes: the domains of a table mostly share their labels.
func canonicalLike(l Labels, like []byte) ([]byte, error) {
	if len(l) == 0 {
		return nil, nil
	}
	for k := range l {
		if err := pdu.CheckLabelName(k); err != nil {
			return nil, err
		}
	}
	// Written on the stack first: kept only when unlike like. (plain is
	// never returned itself, so that buf stays on the stack.)
	var buf [128]byte
	var b []byte
	if plain, ok := appendPlainJSON(buf[:0], l); ok {
		if like != nil && string(plain) == string(like) {
			return like, nil
		}
		b = bytes.Clone(plain)
	} else {
		var err error
		if b, err = json.Marshal(map[string]any(l)); err != nil {
			return nil, err
		}
	}
	if len(b) >= 65535 {
		return nil, fmt.Errorf("%d bytes of JSON, the limit is 65534", len(b))
	}
	return b, nil
}

// appendPlainJSON appends what json.Marshal makes of the usual small
// label set, of integers and of strings that JSON writes as they are,
// without its reflection, which the agent's many instances and domains
// paid for at every build; ok is false for anything else (json.Marshal's
// then).
func appendPlainJSON(b []byte, l Labels) (_ []byte, ok bool) {
	var keys [8]string
	if len(l) > len(keys) {
		return nil, false
	}
	n := 0
	for k, v := range l {
		switch v := v.(type) {
		case int, int32, int64, uint32:
		case string:
			if !plainString(v) {
				return nil, false
			}
		default:
			return nil, false
		}
		if !plainString(k) {
			return nil, false
		}
		keys[n] = k
		n++
	}
	slices.Sort(keys[:n])
	b = append(b, '{')
	for i, k := range keys[:n] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), k...), '"', ':')
		switch v := l[k].(type) {
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case int32:
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case uint32:
			b = strconv.AppendUint(b, uint64(v), 10)
		case string:
			b = append(append(append(b, '"'), v...), '"')
		}
	}
	return append(b, '}'), true
}

// plainString is whether JSON writes s as it is between its quotes:
// printable ASCII, none of which encoding/json escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Domain returns the agent's domain number.
func (t *Table) Domain() int { return t.domain }

// Metric returns the metric with the given PMID.
func (t *Table) Metric(pmid pdu.PMID) (*Metric, bool) {
	i, ok := t.byPMID[pmid]
	if !ok {
		return nil, false
	}
	return &t.metrics[i], true
}

// Metrics returns every metric, in the order given to NewTable.
func (t *Table) Metrics() []Metric { return t.metrics }

// InDom returns an instance domain.
func (t *Table) InDom(indom pdu.InDom) (*InDom, bool) {
	i, ok := t.byInDom[indom]
	if !ok {
		return nil, false
	}
	return &t.indoms[i], true
}

// Instance returns the instance with id inst.
func (d *InDom) Instance(inst int32) (*Instance, bool) {
	l := d.members()
	i, ok := l.byID[inst]
	if !ok {
		return nil, false
	}
	return &l.all[i], true
}

// lookupInstance finds an instance by name the way libpcp_pmda does: an
// exact match, or, when the name asked for has no space, a match with the
// part of an instance name before its first space.
func (d *InDom) lookupInstance(name []byte) (*Instance, bool) {
	all := d.members().all
	for i := range all {
		if all[i].Name == string(name) {
			return &all[i], true
		}
	}
	if strings.IndexByte(string(name), ' ') >= 0 {
		return nil, false
	}
	for i := range all {
		n := all[i].Name
		if sp := strings.IndexByte(n, ' '); sp >= 0 && n[:sp] == string(name) {
			return &all[i], true
		}
	}
	return nil, false
}

func (t *Table) find(name string) *node {
	if name == "" {
		return t.root
	}
	n := t.root
	for name != "" {
		p := name
		if i := strings.IndexByte(name, '.'); i >= 0 {
			p, name = name[:i], name[i+1:]
			if name == "" {
				return nil // trailing dot
			}
		} else {
			name = ""
		}
		if n = n.child(p); n == nil {
			return nil
		}
	}
	return n
}

// PMID resolves a full metric name. Only leaves have PMIDs: an unknown or
// non-leaf name gives PM_ERR_NAME, as libpcp_pmda's pmdaTreePMID does.
func (t *Table) PMID(name string) (pdu.PMID, error) {
	n := t.find(name)
	if n == nil || !n.leaf {
		return pdu.PMIDNull, pdu.ErrName
	}
	return n.pmid, nil
}

// Names returns every full name of pmid.
func (t *Table) Names(pmid pdu.PMID) ([]string, error) {
	if ns := t.names[pmid]; len(ns) > 0 {
		return ns, nil
	}
	return nil, pdu.ErrPMID
}

// Child is one entry of a Children listing.
type Child struct {
	Name string // relative to the parent
	Leaf bool
}

// Children lists the immediate children of name. A leaf has none; an
// unknown name gives PM_ERR_NAME.
func (t *Table) Children(name string, dst []Child) ([]Child, error) {
	dst = dst[:0]
	n := t.find(name)
	if n == nil {
		return dst, pdu.ErrName
	}
	for _, c := range n.children {
		dst = append(dst, Child{c.name, c.leaf})
	}
	return dst, nil
}

// Traverse lists the full names of every leaf at or below name. A leaf
// lists itself; an unknown name gives PM_ERR_NAME; a known but empty
// subtree gives an empty list.
func (t *Table) Traverse(name string, dst []string) ([]string, error) {
	dst = dst[:0]
	n := t.find(name)
	if n == nil || n == t.root && name != "" {
		return dst, pdu.ErrName
	}
	var walk func(*node)
	walk = func(n *node) {
		if n.leaf {
			dst = append(dst, n.full)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(n)
	return dst, nil
}
