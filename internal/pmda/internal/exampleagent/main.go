// Command exampleagent is a small PMDA built on package pmda, for tests
// that drive it with PCP's own tools (dbpmda, pmcd). It serves a few
// singular metrics and a dynamic subtree of per-instance metrics, with
// fixed values, in domain 250 (or -d).
package main

import (
	"flag"
	"fmt"
	"os"

	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
)

type fetcher struct{ fetches int32 }

func (f *fetcher) Prepare(*pmda.FetchRequest) error { f.fetches++; return nil }

func (f *fetcher) Values(m *pmda.Metric, w *pmda.ValueWriter) error {
	switch m.Desc.PMID.Cluster()<<10 | m.Desc.PMID.Item() {
	case 0<<10 | 0:
		w.String(pdu.InNull, "1.0.1")
	case 0<<10 | 1:
		w.Int32(pdu.InNull, f.fetches)
	case 2<<10 | 0:
		w.Uint64(0, 5)
		w.Uint64(1, 7)
	case 2<<10 | 1:
		w.Double(0, 0.5)
		w.Double(1, 1)
	case 3<<10 | 0:
		return pdu.ErrAgain
	}
	return nil
}

func main() {
	domain := flag.Int("d", 250, "domain `number`")
	socket := flag.String("u", "", "listen on the unix socket at `path` instead of stdin/stdout")
	logfile := flag.String("l", "", "log to `file` instead of stderr")
	flag.Parse()

	logw := os.Stderr
	if *logfile != "" {
		f, err := os.OpenFile(*logfile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		logw = f
	}
	log := pmda.NewLogger(logw, "pmdaexample")
	host, _ := os.Hostname()
	log.Start(host)

	d := *domain
	cpu := pdu.NewInDom(d, 0)
	t, err := pmda.NewTable(pmda.TableSpec{
		Domain: d,
		Metrics: []pmda.Metric{
			{Name: "example.version", OneLine: "Agent version", Help: "The version of the example agent.",
				Desc: pdu.Desc{PMID: pdu.NewPMID(d, 0, 0), Type: pdu.ValueString, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete}},
			{Name: "example.fetches", OneLine: "Fetches so far",
				Desc: pdu.Desc{PMID: pdu.NewPMID(d, 0, 1), Type: pdu.ValueInt32, InDom: pdu.InDomNull, Sem: pdu.SemCounter, Units: pdu.UnitsCount}},
			{Name: "example.dyn.counter.value", OneLine: "The values of the counter", Labels: pmda.Labels{"unit": "events"},
				Desc: pdu.Desc{PMID: pdu.NewPMID(d, 2, 0), Type: pdu.ValueUint64, InDom: cpu, Sem: pdu.SemCounter, Units: pdu.UnitsCount}},
			{Name: "example.dyn.counter.dutycycle", OneLine: "Counter duty cycle",
				Desc: pdu.Desc{PMID: pdu.NewPMID(d, 2, 1), Type: pdu.ValueDouble, InDom: cpu, Sem: pdu.SemInstant}},
			{Name: "example.dyn.later", OneLine: "Never ready",
				Desc: pdu.Desc{PMID: pdu.NewPMID(d, 3, 0), Type: pdu.ValueInt64, InDom: pdu.InDomNull, Sem: pdu.SemInstant}},
		},
		InDoms: []pmda.InDom{{InDom: cpu, OneLine: "per cpu",
			Labels:    pmda.Labels{"device_type": "cpu", "indom_name": "per cpu"},
			Instances: []pmda.Instance{{ID: 0, Name: "cpu0", Labels: pmda.Labels{"cpu": 0}}, {ID: 1, Name: "cpu1", Labels: pmda.Labels{"cpu": 1}}}}},
		DomainLabels: pmda.Labels{"agent": "example"},
		Subtrees:     []string{"example.dyn", "example.derived"},
	})
	if err != nil {
		log.Errorf("%v", err)
		os.Exit(1)
	}
	ep := pmda.Endpoint{Transport: pmda.Pipe}
	if *socket != "" {
		ep = pmda.Endpoint{Transport: pmda.Unix, Path: *socket}
	}
	ln, err := pmda.Listen(ep)
	if err != nil {
		log.Errorf("%v", err)
		os.Exit(1)
	}
	conn, err := ln.Accept()
	if err != nil {
		log.Errorf("%v", err)
		os.Exit(1)
	}
	if err := pmda.New(pmda.Config{Fetcher: &fetcher{}, Log: log}, t).Serve(conn); err != nil {
		log.Errorf("%v", err)
		os.Exit(1)
	}
	log.Finish()
}
