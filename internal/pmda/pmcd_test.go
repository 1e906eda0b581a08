package pmda

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
	"perfevent/internal/testwait"
)

const pmcdBin = "/usr/lib/pcp/bin/pmcd"

// TestRealPMCD runs a private pmcd (its own port, config, PMNS and socket;
// the system pmcd is untouched) with the example agent as a pipe agent, and
// asks it for everything through pminfo: dynamic names, descriptors, help,
// labels, instances and values all cross pmcd's own decoders.
func TestRealPMCD(t *testing.T) {
	if _, err := os.Stat(pmcdBin); err != nil {
		t.Skip("needs PCP's pmcd at " + pmcdBin)
	}
	pminfo, err := exec.LookPath("pminfo")
	if err != nil {
		t.Skip("needs pminfo in $PATH")
	}
	testneed.Root(t, "as pmcd -U root keeps the test independent of the pcp user")
	if testing.Short() {
		t.Skip("starts pmcd; skipped with -short")
	}
	agent := testexec.BuildTemp(t, "./internal/exampleagent", "exampleagent")
	dir := filepath.Dir(agent)
	pmns, _ := os.ReadFile("testdata/example.pmns")
	os.WriteFile(filepath.Join(dir, "root"), pmns, 0o644)
	conf := "example 250 pipe binary " + agent + " -d 250 -l " + filepath.Join(dir, "agent.log") + "\n"
	os.WriteFile(filepath.Join(dir, "pmcd.conf"), []byte(conf), 0o644)

	probe, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip("no IPv4 loopback")
	}
	port := strconv.Itoa(probe.Addr().(*net.TCPAddr).Port)
	probe.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pmcd := exec.CommandContext(ctx, pmcdBin, "-f", "-A", "-U", "root", "-p", port, "-i", "127.0.0.1",
		"-c", filepath.Join(dir, "pmcd.conf"), "-n", filepath.Join(dir, "root"),
		"-s", filepath.Join(dir, "pmcd.socket"), "-l", filepath.Join(dir, "pmcd.log"), "-x", filepath.Join(dir, "pmcd.fatal"))
	pmcd.Dir = dir
	if err := pmcd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		pmcd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { pmcd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			pmcd.Process.Kill()
			<-done
		}
		if t.Failed() {
			for _, f := range []string{"pmcd.log", "agent.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	}()

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, pminfo, append([]string{"-h", "127.0.0.1"}, args...)...)
		cmd.Env = append(os.Environ(), "PMCD_PORT="+port)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run()
		return out.String()
	}
	var out string
	if !testwait.Until(testwait.Settle, func() bool {
		out = run("-f", "example.version")
		return strings.Contains(out, `value "1.0.1"`)
	}) {
		t.Fatalf("pmcd never answered for the agent:\n%s", out)
	}
	out = run("-dfmtTl", "example.dyn")
	for _, want := range []string{
		"example.dyn.counter.value PMID: 250.2.0 [The values of the counter]",
		"Data Type: 64-bit unsigned int  InDom: 250.0 0x3e800000",
		`inst [0 or "cpu0"] value 5`,
		`inst [1 or "cpu1"] value 7`,
		`inst [1 or "cpu1"] value 1`,
		`"agent":"example"`,
		`"cpu":1,"device_type":"cpu"`,
		`"unit":"events"`,
		"example.dyn.later PMID: 250.3.0 [Never ready]",
		"Try again. Information not currently available",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pminfo output lacks %q", want)
		}
	}
	if strings.Contains(out, "IPC protocol failure") {
		t.Errorf("pmcd saw a protocol failure")
	}
	if t.Failed() {
		t.Logf("pminfo:\n%s", out)
	}
}
