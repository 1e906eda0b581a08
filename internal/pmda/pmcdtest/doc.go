// Package pmcdtest plays pmcd's side of the connection to a PCP agent
// (PMDA), for tests and for small programs that drive an agent without a
// pmcd: the CREDS handshake, typed requests that return decoded replies,
// and the clean shutdown pmcd performs by closing its pipe.
//
// An agent can be met in two ways.
//
// A built agent binary, over the stdin/stdout pipes pmcd gives it (a
// pmcd.conf "pipe" agent). StartCommand sets the command's Stdin and
// Stdout, starts it and does the handshake; Close closes the agent's stdin,
// as pmcd does, and waits for it to exit:
//
//	// pmdaperfevent with its files in dir: -U root keeps it root, so that
//	// the test needs no pcp user; see pmdaperfevent(1) for the flags.
//	cmd := exec.Command("pmdaperfevent", "-d", "127", "-U", "root",
//		"-c", dir+"/perfevent.conf", "-l", dir+"/perfevent.log",
//		"--lockfile", dir+"/perflock", "--pmids", dir+"/pmids")
//	c, err := pmcdtest.StartCommand(cmd)
//	if err != nil { ... }
//	defer c.Close()
//	id, err := c.PMID("perfevent.hwcounters.cpu_clock.value")
//	for range 2 { // a counter's second value shows it counting
//		r, err := c.Fetch(id)
//		if err != nil { ... }
//		for _, v := range r.Sets[0].Values {
//			fmt.Println(v.Inst, v.Float64()) // instance id (a CPU), count
//		}
//	}
//
// The instances' names ("cpu0", ...) come from c.Instance(desc.InDom,
// pdu.InNull, ""), desc being c.Desc(id).
//
// An agent in the same process, over a pipe pair (net.Pipe): Connect runs
// the agent's serve function on its end, typically (*pmda.Agent).Serve:
//
//	c, err := pmcdtest.Connect(agent.Serve)
//
// Names. An agent whose names are dynamic (perfevent's are: the names
// depend on its configuration) answers PMNS requests, as pmcd forwards them
// to it; PMID, Names, Children and Traverse ask those. A metric's PMID is
// therefore found by name without reading any pmns file:
// c.PMID("perfevent.active").
//
// Replies. Every request waits at most 5 s (pmcd's default for agents;
// SetTimeout changes it) for the reply. When the agent answers with an
// ERROR PDU, the error returned is its pdu.Err itself, so callers compare
// it directly:
//
//	if _, err := c.Desc(id); err == pdu.ErrPMID { ... }
//
// Other errors (a reply of the wrong type, a PDU that does not decode, a
// timeout, the agent gone) are ordinary errors; after a timeout or a
// framing error the connection is out of step and should be closed.
//
// Client slots. pmcd multiplexes its clients onto one connection, naming
// the client slot in each request's "from" word; an agent keeps a profile
// and attributes per slot. A Client sends as slot 0; Slot returns a Client
// on the same connection that sends as another slot.
//
// Raw PDUs. Send, Next and Ask exchange any PDU built with pdu.Builder,
// for tests of malformed or unexpected requests.
//
// Values and slices returned by a call stay valid after later calls: each
// reply is decoded from its own copy.
//
// The package depends only on internal/pdu, so that internal/pmda's own
// tests can use it.
package pmcdtest
