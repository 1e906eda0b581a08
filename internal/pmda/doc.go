// Package pmda is a framework for PCP daemon agents (PMDAs): it meets pmcd
// over a pipe or socket, performs the CREDS handshake, and answers every
// request pmcd forwards, from a Table of metrics, instance domains, help
// text and labels, and a Fetcher that produces values. It knows nothing
// about what is being measured.
//
// Behaviour follows libpcp_pmda as a PMDA_INTERFACE_7 agent: every
// request-bearing PDU gets exactly one reply; PROFILE, ATTR and pmcd's
// end-of-context notice are recorded but never answered; a request that
// fails to decode is answered with PM_ERR_IPC; unknown PDU types are
// logged. Client state (the last profile, attributes) is kept per pmcd
// client slot and dropped when pmcd reports the client gone. The whole
// Table, including its dynamic namespace, answers PMNS requests, and can
// be swapped at run time with SetTable; the next RESULT then carries
// PMCD_NAMES_CHANGE.
//
// A minimal agent:
//
//	type hello struct{}
//
//	func (hello) Prepare(*pmda.FetchRequest) error { return nil }
//	func (hello) Values(m *pmda.Metric, w *pmda.ValueWriter) error {
//		w.String(pdu.InNull, "hello")
//		return nil
//	}
//
//	func main() {
//		t, err := pmda.NewTable(pmda.TableSpec{
//			Domain: 200,
//			Metrics: []pmda.Metric{{
//				Name:    "hello.greeting",
//				Desc:    pdu.Desc{PMID: pdu.NewPMID(200, 0, 0), Type: pdu.ValueString,
//					InDom: pdu.InDomNull, Sem: pdu.SemDiscrete},
//				OneLine: "A greeting",
//			}},
//			DomainLabels: pmda.Labels{"agent": "hello"},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		ln, err := pmda.Listen(pmda.Endpoint{Transport: pmda.Pipe})
//		if err != nil {
//			log.Fatal(err)
//		}
//		conn, err := ln.Accept()
//		if err != nil {
//			log.Fatal(err)
//		}
//		logger := pmda.NewLogger(os.Stderr, "pmdahello")
//		agent := pmda.New(pmda.Config{Fetcher: hello{}, Log: logger}, t)
//		if err := agent.Serve(conn); err != nil {
//			logger.Errorf("%v", err)
//		}
//	}
//
// Fetch is allocation-free in steady state: the agent reuses its request
// and reply buffers, and a Fetcher that writes through the ValueWriter adds
// nothing. Fetcher.Prepare sees every PMID of a FETCH before any value is
// asked for, so each underlying counter need be read only once.
package pmda
