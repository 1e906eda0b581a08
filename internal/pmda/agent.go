package pmda

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"perfevent/internal/logging"
	"perfevent/internal/pdu"
)

// Fetcher produces metric values. Both methods run on the goroutine that
// called Serve, one FETCH at a time; anything they share with other
// goroutines needs the Fetcher's own locking.
type Fetcher interface {
	// Prepare is called once per FETCH, before any Values call, with every
	// PMID requested (unknown ones included). It is the place to read each
	// needed counter once. An error fails the whole fetch: pmcd then gives
	// every PMID of this agent that error code (PM_ERR_AGAIN, say).
	Prepare(req *FetchRequest) error
	// Values writes the values of m through w, one call per requested
	// PMID the table knows (repeats included). Writing nothing gives
	// numval 0; an error gives this PMID alone that error code, with any
	// values already written dropped. A pdu.Err is sent as is, a
	// syscall.Errno as -errno, anything else as PM_ERR_GENERIC.
	Values(m *Metric, w *ValueWriter) error
}

// FetchRequest describes one FETCH. It is reused: do not keep it, or its
// PMIDs, after Prepare returns.
type FetchRequest struct {
	Client int32      // pmcd's client slot (the PDU's from field)
	Ctx    int32      // the client's own context number
	PMIDs  []pdu.PMID // in request order, repeats kept
	Table  *Table     // the table this fetch is answered from
}

// Config configures an Agent.
type Config struct {
	Fetcher Fetcher
	Log     logging.Logger // nil discards
	// CredFlags are sent in the CREDS handshake; pdu.FlagAuth asks pmcd
	// for client attributes (PDU_ATTR). perfevent sends 0.
	CredFlags uint16
	// SlowRequest is how long a request may take before a warning is
	// logged; pmcd drops an agent that takes 5 s. Default 1 s.
	SlowRequest time.Duration
	// OnEndContext, if set, is called when pmcd reports that a client
	// went away (PDU_ERROR PM_ERR_NOTCONN), after its state is dropped.
	OnEndContext func(client int32)
	// OnAttr, if set, is called for each client attribute pmcd sends.
	OnAttr func(client int32, key int32, value string)
}

// Agent answers pmcd's requests from a Table and a Fetcher.
type Agent struct {
	cfg     Config
	log     logging.Logger
	table   atomic.Pointer[Table]
	pending atomic.Int32 // state-change flags for the next RESULT
	serving atomic.Bool

	// Loop state, touched only by the goroutine in Serve.
	w       io.Writer
	p       pdu.Parser
	b       pdu.Builder
	vw      ValueWriter
	req     FetchRequest
	clients map[int32]*client
	creds   []pdu.Cred
	names   []pdu.Name
	ids     []pdu.PMID
	kids    []Child
	leaves  []string
	store   pdu.Result
	scratch pdu.Profile
	panics  int       // Fetcher panics recovered
	panicAt time.Time // when one was last logged
}

// client is what the agent remembers about one pmcd client slot.
type client struct {
	profile pdu.Profile
	attrs   map[int32]string
}

// New returns an agent serving t.
func New(cfg Config, t *Table) *Agent {
	a := &Agent{cfg: cfg, log: logging.Or(cfg.Log), clients: make(map[int32]*client)}
	if a.cfg.SlowRequest <= 0 {
		a.cfg.SlowRequest = time.Second
	}
	a.table.Store(t)
	return a
}

// Table returns the table currently served.
func (a *Agent) Table() *Table { return a.table.Load() }

// SetTable replaces the served table; safe from any goroutine. Requests
// already being answered finish with the old table. The next RESULT tells
// pmcd's clients that the namespace changed (PMCD_NAMES_CHANGE).
func (a *Agent) SetTable(t *Table) {
	a.table.Store(t)
	a.SignalChange(pdu.StateNamesChange)
}

// SignalChange adds state-change flags (pdu.StateNamesChange,
// pdu.StateLabelChange) to the next RESULT; safe from any goroutine.
func (a *Agent) SignalChange(flags int32) {
	a.pending.Or(flags & (pdu.StateNamesChange | pdu.StateLabelChange))
}

// Serve speaks the agent side of the protocol on conn until pmcd closes
// it: the CREDS handshake, then one reply per request. It returns nil at a
// clean end of stream, or the read, write or framing error that ended it.
func (a *Agent) Serve(conn io.ReadWriter) error {
	if !a.serving.CompareAndSwap(false, true) {
		return errors.New("pmda: Serve is already running")
	}
	defer a.serving.Store(false)
	a.w = conn
	r := pdu.NewReader(conn)

	if err := a.send(a.b.Creds(int32(os.Getpid()), pdu.VersionCred(a.cfg.CredFlags))); err != nil {
		return err
	}
	first := true
	for {
		h, msg, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pmda: reading from pmcd: %w", err)
		}
		if first {
			first = false
			if h.Type == pdu.TypeCreds {
				a.handshake(msg)
				continue
			}
			a.log.Errorf("pmcd's first PDU is %s, not CREDS; carrying on", h.Type)
		}
		start := time.Now()
		if err := a.dispatch(h, msg); err != nil {
			return err
		}
		if d := time.Since(start); d > a.cfg.SlowRequest {
			a.log.Warningf("%s from client %d took %v (pmcd gives up after 5s)", h.Type, h.From, d.Round(time.Millisecond))
		}
	}
}

func (a *Agent) send(msg []byte) error {
	if _, err := a.w.Write(msg); err != nil {
		return fmt.Errorf("pmda: writing to pmcd: %w", err)
	}
	return nil
}

func (a *Agent) reply(code pdu.Err) error { return a.send(a.b.Error(0, code)) }

func (a *Agent) handshake(msg []byte) {
	if _, err := a.p.Start(msg); err != nil {
		a.log.Errorf("pmcd's CREDS: %v", err)
		return
	}
	creds, err := a.p.Creds(a.creds)
	a.creds = creds
	if err != nil {
		a.log.Errorf("pmcd's CREDS: %v", err)
		return
	}
	for _, c := range creds {
		if c.Type == pdu.CredVersion && c.Version != pdu.PDUVersion {
			a.log.Warningf("pmcd speaks PDU version %d, this agent version %d", c.Version, pdu.PDUVersion)
		}
	}
}

// badRequest answers a request that failed to decode, as libpcp_pmda does.
func (a *Agent) badRequest(h pdu.Header, err error) error {
	a.log.Errorf("client %d: %v", h.From, err)
	return a.reply(pdu.ErrIPC)
}

// dispatch handles one PDU. Only write errors are returned: everything
// else is answered or logged.
func (a *Agent) dispatch(h pdu.Header, msg []byte) error {
	if _, err := a.p.Start(msg); err != nil {
		// Reader.Next already framed it, so this cannot happen; stay safe.
		a.log.Errorf("client %d: %v", h.From, err)
		return nil
	}
	t := a.table.Load()
	switch h.Type {
	case pdu.TypeProfile:
		a.profile(h)
		return nil
	case pdu.TypeAttr:
		a.attr(h)
		return nil
	case pdu.TypeError:
		a.errorPDU(h)
		return nil
	case pdu.TypeFetch:
		return a.fetch(h, t)
	case pdu.TypeDescReq:
		pmid, err := a.p.DescReq()
		if err != nil {
			return a.badRequest(h, err)
		}
		m, ok := t.Metric(pmid)
		if !ok {
			return a.reply(pdu.ErrPMID)
		}
		return a.send(a.b.Desc(0, m.Desc))
	case pdu.TypeInstanceReq:
		return a.instance(h, t)
	case pdu.TypeTextReq:
		return a.text(h, t)
	case pdu.TypePMNSNames:
		names, _, err := a.p.Names(a.names)
		a.names = names
		if err == nil && len(names) != 1 {
			err = fmt.Errorf("PMNS_NAMES request with %d names, expected 1", len(names))
		}
		if err != nil {
			return a.badRequest(h, err)
		}
		pmid, err := t.PMID(string(names[0].Name))
		if err != nil {
			return a.reply(pdu.ErrName)
		}
		return a.send(a.b.IDs(0, 0, pmid))
	case pdu.TypePMNSIDs:
		return a.pmnsIDs(h, t)
	case pdu.TypePMNSChild, pdu.TypePMNSTraverse:
		return a.pmnsWalk(h, t)
	case pdu.TypeLabelReq:
		return a.label(h, t)
	case pdu.TypeResult:
		if err := a.p.Result(&a.store); err != nil {
			return a.badRequest(h, err)
		}
		return a.reply(pdu.ErrPermission)
	default:
		a.log.Warningf("client %d: ignoring unexpected %s PDU (%d bytes)", h.From, h.Type, h.Len)
		return nil
	}
}

func (a *Agent) client(slot int32) *client {
	c := a.clients[slot]
	if c == nil {
		c = &client{}
		a.clients[slot] = c
	}
	return c
}

func (a *Agent) profile(h pdu.Header) {
	// Decode into scratch space so a bad PROFILE leaves the old one intact.
	if err := a.p.Profile(&a.scratch); err != nil {
		a.log.Errorf("client %d: %v; keeping the previous profile", h.From, err)
		return
	}
	a.client(h.From).profile.CopyFrom(&a.scratch)
}

// profileOf returns a client's last profile; nil, meaning "everything",
// when it has sent none.
func (a *Agent) profileOf(slot int32) *pdu.Profile {
	if c := a.clients[slot]; c != nil {
		return &c.profile
	}
	return nil
}

func (a *Agent) attr(h pdu.Header) {
	key, val, err := a.p.Attr()
	if err != nil {
		a.log.Errorf("client %d: %v", h.From, err)
		return
	}
	v := string(val)
	if n := len(v); n > 0 && v[n-1] == 0 {
		v = v[:n-1]
	}
	c := a.client(h.From)
	if c.attrs == nil {
		c.attrs = make(map[int32]string)
	}
	c.attrs[key] = v
	if a.cfg.OnAttr != nil {
		a.cfg.OnAttr(h.From, key, v)
	}
}

func (a *Agent) errorPDU(h pdu.Header) {
	code, err := a.p.Error()
	switch {
	case err != nil:
		a.log.Errorf("client %d: %v", h.From, err)
	case code == pdu.ErrNotConn:
		delete(a.clients, h.From)
		if a.cfg.OnEndContext != nil {
			a.cfg.OnEndContext(h.From)
		}
	default:
		a.log.Warningf("client %d: unexpected ERROR PDU from pmcd: %s (%d)", h.From, code.Error(), int32(code))
	}
}

// errCode turns a callback's error into the code sent to pmcd.
func errCode(err error) pdu.Err {
	switch e := err.(type) {
	case pdu.Err:
		return e
	case syscall.Errno:
		return pdu.Err(-int32(e))
	case *TypeError:
		return pdu.ErrType
	case *InstError:
		return pdu.ErrInst
	}
	var pe pdu.Err
	if errors.As(err, &pe) {
		return pe
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return pdu.Err(-int32(errno))
	}
	return pdu.ErrGeneric
}

func (a *Agent) fetch(h pdu.Header, t *Table) error {
	ctx, pmids, err := a.p.Fetch(a.req.PMIDs)
	a.req.PMIDs = pmids
	if err != nil {
		return a.badRequest(h, err)
	}
	a.req.Client, a.req.Ctx, a.req.Table = h.From, ctx, t
	f := a.cfg.Fetcher
	if f != nil {
		if err := a.prepare(f); err != nil {
			code := errCode(err)
			if _, plain := err.(pdu.Err); !plain {
				a.log.Errorf("fetch: %v", err)
			}
			return a.reply(code)
		}
	}
	prof := a.profileOf(h.From)
	flags := a.pending.Swap(0)
	a.b.StartResult(0, flags)
	for _, pmid := range pmids {
		a.b.AddSet(pmid)
		m, ok := t.Metric(pmid)
		if !ok {
			a.b.FailSet(pdu.ErrPMID)
			continue
		}
		if f == nil {
			continue
		}
		a.vw.reset(&a.b, m, prof)
		err := a.values(f, m)
		if err == nil {
			err = a.vw.err
		}
		if err != nil {
			if _, plain := err.(pdu.Err); !plain {
				a.log.Errorf("fetch %s (%s): %v", m.Name, pmid, err)
			}
			a.b.FailSet(errCode(err))
		}
	}
	msg, err := a.b.Finish()
	if err != nil {
		a.log.Errorf("fetch: building the RESULT: %v", err)
		a.SignalChange(flags) // still owed to the clients
		return a.reply(pdu.ErrGeneric)
	}
	return a.send(msg)
}

// A Fetcher that panics fails the fetch it was answering, not the agent:
// pmcd marks an agent that dies as gone until pmcd itself restarts, so one
// bad value would cost every metric the agent has.
func (a *Agent) prepare(f Fetcher) (err error) {
	defer a.contain(&err)
	return f.Prepare(&a.req)
}

func (a *Agent) values(f Fetcher, m *Metric) (err error) {
	defer a.contain(&err)
	return f.Values(m, &a.vw)
}

// contain turns a Fetcher's panic into PM_ERR_GENERIC. The first is logged
// with its stack, for the bug report; later ones at most once a minute, so
// that a panic on every fetch cannot fill the disk.
func (a *Agent) contain(err *error) {
	p := recover()
	if p == nil {
		return
	}
	*err = pdu.ErrGeneric
	a.panics++
	now := time.Now()
	switch {
	case a.panics == 1:
		a.log.Errorf("fetch: recovered from a panic, answering PM_ERR_GENERIC: %v\n%s", p, debug.Stack())
	case now.Sub(a.panicAt) >= time.Minute:
		a.log.Errorf("fetch: %d panics recovered so far, the latest: %v", a.panics, p)
	default:
		return
	}
	a.panicAt = now
}

func (a *Agent) instance(h pdu.Header, t *Table) error {
	req, err := a.p.InstanceReq()
	if err != nil {
		return a.badRequest(h, err)
	}
	d, ok := t.InDom(req.InDom)
	if !ok {
		return a.reply(pdu.ErrInDom)
	}
	a.b.StartInstance(0, req.InDom)
	switch {
	case req.Name != nil:
		in, ok := d.lookupInstance(req.Name)
		if !ok {
			return a.reply(pdu.ErrInst)
		}
		a.b.AddInstance(in.ID, "")
	case req.Inst != pdu.InNull:
		in, ok := d.Instance(req.Inst)
		if !ok {
			return a.reply(pdu.ErrInst)
		}
		a.b.AddInstance(pdu.InNull, in.Name)
	default:
		// The profile does not apply to instance requests.
		all := d.members().all
		for i := range all {
			a.b.AddInstance(all[i].ID, all[i].Name)
		}
	}
	msg, err := a.b.Finish()
	if err != nil {
		a.log.Errorf("instance %s: %v", req.InDom, err)
		return a.reply(pdu.ErrGeneric)
	}
	return a.send(msg)
}

func (a *Agent) text(h pdu.Header, t *Table) error {
	ident, typ, err := a.p.TextReq()
	if err != nil {
		return a.badRequest(h, err)
	}
	var one, help string
	switch {
	case typ&pdu.TextPMID != 0:
		if m, ok := t.Metric(pdu.PMID(ident)); ok {
			one, help = m.OneLine, m.LongHelp()
		}
	case typ&pdu.TextInDom != 0:
		if d, ok := t.InDom(pdu.InDom(ident)); ok {
			one, help = d.OneLine, d.Help
		}
	}
	text := help
	if typ&pdu.TextOneLine != 0 {
		text = one
	}
	if text == "" {
		return a.reply(pdu.ErrText)
	}
	return a.send(a.b.Text(0, ident, text))
}

func (a *Agent) pmnsIDs(h pdu.Header, t *Table) error {
	_, ids, err := a.p.IDs(a.ids)
	a.ids = ids
	if err == nil && len(ids) == 0 {
		err = errors.New("PMNS_IDS request without PMIDs")
	}
	if err != nil {
		return a.badRequest(h, err)
	}
	a.b.StartNames(0, false)
	found := false
	for _, id := range ids {
		names, err := t.Names(id)
		if err != nil {
			continue
		}
		found = true
		for _, n := range names {
			a.b.AddName(n, pdu.PMNSLeaf)
		}
	}
	if !found {
		return a.reply(pdu.ErrPMID)
	}
	msg, err := a.b.Finish()
	if err != nil {
		a.log.Errorf("PMNS_IDS: %v", err)
		return a.reply(pdu.ErrGeneric)
	}
	return a.send(msg)
}

func (a *Agent) pmnsWalk(h pdu.Header, t *Table) error {
	subtype, name, err := a.p.NameReq()
	if err != nil {
		return a.badRequest(h, err)
	}
	if h.Type == pdu.TypePMNSChild {
		a.kids, err = t.Children(string(name), a.kids)
		if err != nil {
			return a.reply(errCode(err))
		}
		withStatus := subtype == 1
		a.b.StartNames(0, withStatus)
		for _, k := range a.kids {
			st := int32(pdu.PMNSNonLeaf)
			if k.Leaf {
				st = pdu.PMNSLeaf
			}
			a.b.AddName(k.Name, st)
		}
	} else {
		a.leaves, err = t.Traverse(string(name), a.leaves)
		if err != nil {
			return a.reply(errCode(err))
		}
		a.b.StartNames(0, false)
		for _, n := range a.leaves {
			a.b.AddName(n, pdu.PMNSLeaf)
		}
	}
	msg, err := a.b.Finish()
	if err != nil {
		a.log.Errorf("%s %q: %v", h.Type, name, err)
		return a.reply(pdu.ErrGeneric)
	}
	return a.send(msg)
}

func (a *Agent) label(h pdu.Header, t *Table) error {
	ident, typ, err := a.p.LabelReq()
	if err != nil {
		return a.badRequest(h, err)
	}
	a.b.StartLabel(0, ident, typ)
	switch typ {
	case pdu.LabelDomain:
		if t.domainLabels != nil {
			a.b.AddLabelSet(pdu.InNull, t.domainLabels, pdu.LabelDomain)
		}
	case pdu.LabelCluster:
		if l := t.clusterLabels[pdu.PMID(ident).Cluster()]; l != nil && pdu.PMID(ident).Domain() == t.domain {
			a.b.AddLabelSet(pdu.InNull, l, pdu.LabelCluster)
		}
	case pdu.LabelItem:
		m, ok := t.Metric(pdu.PMID(ident))
		if !ok {
			return a.reply(pdu.ErrPMID)
		}
		if m.labels != nil {
			a.b.AddLabelSet(pdu.InNull, m.labels, pdu.LabelItem)
		}
	case pdu.LabelInDom:
		d, ok := t.InDom(pdu.InDom(ident))
		if !ok {
			return a.reply(pdu.ErrInDom)
		}
		if d.labels != nil {
			a.b.AddLabelSet(pdu.InNull, d.labels, pdu.LabelInDom)
		}
	case pdu.LabelInstances:
		d, ok := t.InDom(pdu.InDom(ident))
		if !ok {
			return a.reply(pdu.ErrInDom)
		}
		// pmcd sends the client's profile first; honour it as
		// libpcp_pmda's instance iterator does.
		prof := a.profileOf(h.From)
		all := d.members().all
		for i := range all {
			in := &all[i]
			if prof.In(d.InDom, in.ID) {
				a.b.AddLabelSet(in.ID, in.labels, pdu.LabelInstances)
			}
		}
	default:
		return a.reply(pdu.ErrType)
	}
	msg, err := a.b.Finish()
	if err != nil {
		a.log.Errorf("labels of type %#x for %#x: %v", typ, ident, err)
		return a.reply(pdu.ErrGeneric)
	}
	return a.send(msg)
}
