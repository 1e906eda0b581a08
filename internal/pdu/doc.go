// Package pdu is PCP's wire format as a daemon agent (PMDA) sees it: the
// PDU framing, identifiers (PMID, InDom, Units), error codes, and a Parser
// and a Builder for every PDU exchanged between pmcd and an agent.
//
// The shape follows golang.org/x/net/dns/dnsmessage. A Reader frames PDUs
// off a stream into a reused buffer; a Parser decodes one PDU's body,
// returning views into it or filling caller-provided slices; a Builder
// appends into a reused buffer. Both directions are provided for every PDU,
// so tests can play pmcd and round-trip what the agent sends.
//
// Nothing here panics on hostile input: every read is bounds-checked and
// every length rule of libpcp's decoders is enforced, with errors naming the
// offending field. Building a RESULT allocates nothing once the Builder's
// buffers have grown to size.
//
//	var b pdu.Builder
//	b.StartResult(0, 0)
//	b.AddSet(pdu.NewPMID(127, 2, 0))
//	b.AddInt64(0, 5)
//	b.AddInt64(1, 7)
//	msg, err := b.Finish() // 76 bytes: docs/pdu-protocol.md, RESULT
package pdu
