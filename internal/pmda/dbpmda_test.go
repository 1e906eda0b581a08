package pmda

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"perfevent/internal/testexec"
)

// TestDbpmda drives the example agent with PCP's own dbpmda, which encodes
// and decodes every PDU with libpcp, the same code pmcd uses.
func TestDbpmda(t *testing.T) {
	dbpmda, err := exec.LookPath("dbpmda")
	if err != nil {
		t.Skip("needs PCP's dbpmda in $PATH (Debian package pcp)")
	}
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	agent := testexec.BuildTemp(t, "./internal/exampleagent", "exampleagent")
	dir := filepath.Dir(agent)
	pmns, _ := filepath.Abs("testdata/example.pmns")
	script := strings.Join([]string{
		"open pipe " + agent + " -l " + filepath.Join(dir, "agent.log"),
		"desc example.version",
		"fetch example.version example.fetches",
		"desc example.dyn.counter.value",
		"fetch example.dyn.counter.value example.dyn.counter.dutycycle example.dyn.later",
		"instance 250.0",
		"text example.dyn.counter.value",
		"children example.dyn",
		"traverse example.dyn",
		"traverse example.derived",
		"name 250.2.1",
		"pmid example.dyn.counter.value",
		"pmid example.dyn.nothing",
		"label domain",
		"label indom 250.0",
		"label instances 250.0",
		"label item 250.2.0",
		"quit", "",
	}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dbpmda, "-n", pmns, "-e")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("dbpmda: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"Data Type: string  InDom: PM_INDOM_NULL 0xffffffff\n    Semantics: discrete  Units: none",
		`value "1.0.1"`,
		"250.0.1 (example.fetches): numval: 1 valfmt: 0 vlist[]:\n   value 1 ",
		"Data Type: 64-bit unsigned int  InDom: 250.0 0x3e800000\n    Semantics: counter  Units: count",
		"250.2.0 (<noname>): numval: 2 valfmt: 1 vlist[]:\n    inst [0 or ???] value 5\n    inst [1 or ???] value 7",
		"inst [0 or ???] value 0.5",
		"250.3.0 (<noname>): Try again. Information not currently available",
		"[  0] inst: 0 name: \"cpu0\"\n[  1] inst: 1 name: \"cpu1\"",
		"[The values of the counter]",
		"Metric: example.dyn\n   non-leaf counter\n       leaf later",
		"Metric: example.dyn\n   example.dyn.counter.value\n   example.dyn.counter.dutycycle\n   example.dyn.later\n",
		"PMID: 250.2.1\n   example.dyn.counter.dutycycle",
		"Metric: example.dyn.counter.value\n   250.2.0",
		"Labels:\n    agent=\"example\"",
		"device_type=\"cpu\"\n    indom_name=\"per cpu\"",
		"[  0] Labels inst: 0\n    cpu=0\n[  1] Labels inst: 1\n    cpu=1",
		"unit=\"events\"",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("dbpmda output lacks %q", want)
		}
	}
	if strings.Contains(got, "IPC protocol failure") {
		t.Errorf("dbpmda saw a protocol failure")
	}
	if t.Failed() {
		t.Logf("dbpmda output:\n%s", got)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
	if !bytes.HasPrefix(log, []byte("Log for pmdaexample on ")) || !bytes.Contains(log, []byte("Log finished ")) {
		t.Errorf("agent log:\n%s", log)
	}
}
