package pmcdtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"time"

	"perfevent/internal/pdu"
)

// DefaultTimeout is how long a Client waits for a reply, and for the agent
// to exit after Close: pmcd's default agent timeout.
const DefaultTimeout = 5 * time.Second

// Client is pmcd's end of one connection to an agent. A Client is not safe
// for concurrent use: like pmcd, it sends one request and reads its reply.
type Client struct {
	*link
	from int32 // the client slot requests are sent as
}

// link is what the Clients of every slot of one connection share.
type link struct {
	limit time.Duration // SetTimeout's; zero means DefaultTimeout

	r     *pdu.Reader
	rd    io.Reader
	w     io.WriteCloser
	b     pdu.Builder
	creds []pdu.Cred

	wait     func() error // waits for the agent to end
	kill     func()       // ends an agent that outstays the timeout, if it can
	waitOnce sync.Once
	ended    chan struct{}
	endErr   error
}

// deadliner is what net.Conn and *os.File pipes offer to bound a read or
// a write.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// handshake starts a Client on an established connection: r carries the
// agent's PDUs, w pmcd's. It reads the agent's CREDS, which an agent sends
// first, and answers with pmcd's. wait is called by Wait and Close to wait
// for the agent to end; its error is theirs.
func handshake(r io.Reader, w io.WriteCloser, wait func() error, kill func()) (*Client, error) {
	l := &link{r: pdu.NewReader(r), rd: r, w: w, wait: wait, kill: kill, ended: make(chan struct{})}
	c := &Client{link: l}
	p, err := c.Next()
	if err != nil {
		return nil, fmt.Errorf("waiting for the agent's CREDS: %w", err)
	}
	if t := p.Header().Type; t != pdu.TypeCreds {
		return nil, fmt.Errorf("the agent spoke %s first, not CREDS", t)
	}
	if l.creds, err = p.Creds(nil); err != nil {
		return nil, fmt.Errorf("the agent's CREDS: %w", err)
	}
	if err := c.Send(l.b.Creds(1, pdu.VersionCred(0))); err != nil {
		return nil, err
	}
	return c, nil
}

// StartCommand starts an agent binary as pmcd starts a pipe agent, with a
// pipe on its stdin and one on its stdout, and does the handshake. The
// command's Stdin and Stdout must be unset; Stderr and the rest are the
// caller's. If the handshake fails the agent is killed.
func StartCommand(cmd *exec.Cmd) (*Client, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c, err := handshake(out, in, cmd.Wait, func() { cmd.Process.Kill() })
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	return c, nil
}

// Connect runs an agent in this process: serve is called on a goroutine
// with the agent's end of a pipe pair, as (*pmda.Agent).Serve expects, and
// that end is closed when serve returns. Wait and Close return serve's
// error.
func Connect(serve func(io.ReadWriter) error) (*Client, error) {
	ours, theirs := net.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serve(theirs)
		theirs.Close()
		done <- err
	}()
	c, err := handshake(ours, ours, func() error { return <-done }, nil)
	if err != nil {
		ours.Close()
		<-done
		return nil, err
	}
	return c, nil
}

// Slot returns a Client on the same connection whose requests come from
// pmcd's client slot n. Profiles, attributes and a ratio's interval are
// kept per slot by the agent.
func (c *Client) Slot(n int32) *Client { return &Client{link: c.link, from: n} }

// AgentCreds returns the credentials the agent sent in its handshake.
func (c *Client) AgentCreds() []pdu.Cred { return c.creds }

// SetTimeout sets how long each reply may take, and the agent's exit after
// Close, for every slot of the connection; zero restores DefaultTimeout.
func (c *Client) SetTimeout(d time.Duration) { c.limit = d }

func (l *link) timeout() time.Duration {
	if l.limit > 0 {
		return l.limit
	}
	return DefaultTimeout
}

// Send writes one PDU to the agent; it expects no reply.
func (c *Client) Send(msg []byte) error {
	if d, ok := c.w.(deadliner); ok {
		d.SetWriteDeadline(time.Now().Add(c.timeout()))
	}
	if _, err := c.w.Write(msg); err != nil {
		return fmt.Errorf("writing to the agent: %w", err)
	}
	return nil
}

// Next reads the agent's next PDU and returns a Parser started on its own
// copy of it.
func (c *Client) Next() (*pdu.Parser, error) {
	if d, ok := c.rd.(deadliner); ok {
		d.SetReadDeadline(time.Now().Add(c.timeout()))
	}
	_, msg, err := c.r.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading from the agent: it closed the connection: %w", err)
		}
		return nil, fmt.Errorf("reading from the agent: %w", err)
	}
	var p pdu.Parser
	if _, err := p.Start(append([]byte(nil), msg...)); err != nil {
		return nil, err
	}
	return &p, nil
}

// Ask sends a request and reads its reply, which must be of type want.
// An ERROR reply is returned as its pdu.Err.
func (c *Client) Ask(req []byte, want pdu.Type) (*pdu.Parser, error) {
	if err := c.Send(req); err != nil {
		return nil, err
	}
	p, err := c.Next()
	if err != nil {
		return nil, err
	}
	h := p.Header()
	if h.From != 0 {
		return nil, fmt.Errorf("%s reply from %d: agents send 0", h.Type, h.From)
	}
	if h.Type == pdu.TypeError && want != pdu.TypeError {
		code, err := p.Error()
		if err != nil {
			return nil, err
		}
		return nil, code
	}
	if h.Type != want {
		return nil, fmt.Errorf("the reply is %s, want %s", h.Type, want)
	}
	return p, nil
}

// Profile sends the slot's instance profile, which the agent does not
// answer.
func (c *Client) Profile(pr *pdu.Profile) error {
	return c.Send(c.b.Profile(c.from, pr))
}

// EndContext tells the agent that the slot's client is gone, as pmcd does
// (an ERROR PDU with PM_ERR_NOTCONN); the agent does not answer.
func (c *Client) EndContext() error {
	return c.Send(c.b.Error(c.from, pdu.ErrNotConn))
}

// Attr sends a client attribute (pdu.AttrProcessID, ...), unanswered.
func (c *Client) Attr(key int32, value []byte) error {
	return c.Send(c.b.Attr(c.from, key, value))
}

// Desc asks for a metric's descriptor.
func (c *Client) Desc(pmid pdu.PMID) (pdu.Desc, error) {
	p, err := c.Ask(c.b.DescReq(c.from, pmid), pdu.TypeDesc)
	if err != nil {
		return pdu.Desc{}, err
	}
	return p.Desc()
}

// Instance asks for an instance domain's instances: all of them (inst
// pdu.InNull, name ""), the one whose id is inst (its name is returned,
// its id as pdu.InNull), or the one called name (its id is returned, its
// name nil).
func (c *Client) Instance(indom pdu.InDom, inst int32, name string) ([]pdu.Instance, error) {
	p, err := c.Ask(c.b.InstanceReq(c.from, indom, inst, name), pdu.TypeInstance)
	if err != nil {
		return nil, err
	}
	_, list, err := p.Instance(nil)
	return list, err
}

// Text asks for help text: typ is pdu.TextOneLine or pdu.TextHelp, with
// pdu.TextPMID (ident a PMID) or pdu.TextInDom (ident an InDom).
func (c *Client) Text(ident uint32, typ int32) (string, error) {
	p, err := c.Ask(c.b.TextReq(c.from, ident, typ), pdu.TypeText)
	if err != nil {
		return "", err
	}
	_, text, err := p.Text()
	return string(text), err
}

// Labels asks for the label sets of typ (pdu.LabelDomain, LabelInDom,
// LabelCluster, LabelItem, LabelInstances) for ident (the domain number, an
// InDom or a PMID). The reply must echo ident and typ.
func (c *Client) Labels(ident uint32, typ int32) ([]pdu.LabelSet, error) {
	p, err := c.Ask(c.b.LabelReq(c.from, ident, typ), pdu.TypeLabel)
	if err != nil {
		return nil, err
	}
	gi, gt, sets, err := p.Label(nil)
	if err != nil {
		return nil, err
	}
	if gi != ident || gt != typ {
		return nil, fmt.Errorf("LABEL reply for %#x type %d, asked for %#x type %d", gi, gt, ident, typ)
	}
	return sets, nil
}

// PMID asks for the PMID of a metric name.
func (c *Client) PMID(name string) (pdu.PMID, error) {
	c.b.StartNames(c.from, false)
	c.b.AddName(name, 0)
	msg, err := c.b.Finish()
	if err != nil {
		return 0, err
	}
	p, err := c.Ask(msg, pdu.TypePMNSIDs)
	if err != nil {
		return 0, err
	}
	_, ids, err := p.IDs(nil)
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("PMNS_IDS for %q has %d PMIDs, want 1", name, len(ids))
	}
	return ids[0], nil
}

// Names asks for the names of a PMID.
func (c *Client) Names(pmid pdu.PMID) ([]string, error) {
	names, _, err := c.names(c.b.IDs(c.from, 0, pmid))
	return names, err
}

// Children asks for the names one level below name, and whether each is a
// leaf (pdu.PMNSLeaf) or not (pdu.PMNSNonLeaf).
func (c *Client) Children(name string) ([]string, []int32, error) {
	return c.names(c.b.NameReq(c.from, pdu.TypePMNSChild, 1, name))
}

// Traverse asks for the full names of every metric at or below name.
func (c *Client) Traverse(name string) ([]string, error) {
	names, _, err := c.names(c.b.NameReq(c.from, pdu.TypePMNSTraverse, 0, name))
	return names, err
}

func (c *Client) names(req []byte) ([]string, []int32, error) {
	p, err := c.Ask(req, pdu.TypePMNSNames)
	if err != nil {
		return nil, nil, err
	}
	list, _, err := p.Names(nil)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(list))
	status := make([]int32, len(list))
	for i, n := range list {
		names[i], status[i] = string(n.Name), n.Status
	}
	return names, status, nil
}

// Wait waits, at most the timeout (SetTimeout), for the agent to end
// without closing the connection (after sending it something it must stop
// on), and returns what Close would.
func (c *Client) Wait() error {
	c.waitOnce.Do(func() {
		go func() {
			c.endErr = c.wait()
			close(c.ended)
		}()
	})
	select {
	case <-c.ended:
		return c.endErr
	case <-time.After(c.timeout()):
		return fmt.Errorf("the agent did not end within %v", c.timeout())
	}
}

// Close ends the agent as pmcd does, by closing pmcd's end of the
// connection, and waits for it (see Wait). It returns the agent's error:
// a command's exit status, or the serve function's error. An agent binary
// still running after the timeout is killed.
func (c *Client) Close() error {
	c.w.Close()
	err := c.Wait()
	select {
	case <-c.ended:
		return err
	default:
	}
	if c.kill != nil {
		c.kill()
		<-c.ended
	}
	return err
}
