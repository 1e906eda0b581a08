package qa

// A fleet is several labs that look like different hosts to PCP, each
// with a pmlogger writing into one archive directory, and a pmproxy that
// ingests those archives into a private redis-server, as a PCP farm
// does with pmlogger_farm and a central pmproxy. Everything listens on
// 127.0.0.1 on free ports and lives in the test's temporary directories.
//
// What makes the labs different hosts: each pmcd runs with -H NAME (its
// pmcd.hostname, which pmlogger records as the archive's host) and its
// own PCP_SYSCONF_DIR, whose labels/fleet file adds the context label
// {"fleet_host":NAME}. pmcd's own hostname, domainname and machineid
// labels are the machine's for all of them, so without that label the
// archives would hash to one time-series source.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fleet is N labs, their pmloggers, a redis-server and a pmproxy.
type Fleet struct {
	Hosts     []*Lab
	Names     []string // fleet_host label and pmcd -H of each lab
	Archives  string   // the directory pmproxy's [discover] watches
	RedisPort int
	ProxyPort int
	Interval  time.Duration // pmlogger's sampling interval
	ProxyPID  int
	RedisPID  int
	dir       string
}

// FleetTools are the programs a fleet needs besides pmcd and the agent.
var FleetTools = []string{"redis-server", "redis-cli", "pmproxy", "pmseries", "pmlogger", "pmdumplog"}

// StartFleet starts n labs running our agent with config, named
// node1...nodeN, and everything around them; all stop when the test
// ends. It skips (fails with PERFEVENT_QA=1) when a tool is missing.
func StartFleet(t testing.TB, n int, config string, interval time.Duration) *Fleet {
	t.Helper()
	e := Direct(t)
	for _, tool := range FleetTools {
		if p := lookPathIn(e.environ(), tool); p == "" {
			unmet(t, "needs %s (scripts/setup installs redis-server and pcp)", tool)
		}
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &Fleet{Archives: filepath.Join(dir, "archives"), Interval: interval, dir: dir}
	if err := os.MkdirAll(f.Archives, 0o755); err != nil {
		t.Fatal(err)
	}
	f.startRedis(t, e)
	for i := 1; i <= n; i++ {
		name := "node" + strconv.Itoa(i)
		sysconf := filepath.Join(dir, name, "sysconf")
		if err := os.MkdirAll(filepath.Join(sysconf, "labels"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(sysconf, "labels", "fleet"), fmt.Sprintf(`{"fleet_host":%q}`+"\n", name))
		l := StartLab(t, Agent{Go: true, Config: config,
			Env:      []string{"PCP_SYSCONF_DIR=" + sysconf},
			PMCDArgs: []string{"-H", name},
			// The root cgroup, which every machine has, for the
			// dashboard's per-cgroup panel.
			Cgroups: "cgroup /\nevent cpu-clock\nevent context-switches\nmax 4\n"})
		f.Hosts = append(f.Hosts, l)
		f.Names = append(f.Names, name)
	}
	// The archives first, then pmproxy: it ingests what each archive
	// gains after it has found it, and finds archives that appear in new
	// subdirectories of the one it watches unreliably (seen with 6.0.3:
	// one host of three).
	for i, l := range f.Hosts {
		logdir := filepath.Join(f.Archives, f.Names[i])
		if err := os.MkdirAll(logdir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(f.dir, f.Names[i], "pmlogger.config")
		writeFile(t, cfg, fmt.Sprintf("log mandatory on %d msec {\n    perfevent\n}\n", interval.Milliseconds()))
		l.Background(t, Cmd{Args: []string{"pmlogger", "-h", l.HostSpec(), "-c", cfg,
			"-l", filepath.Join(f.dir, f.Names[i], "pmlogger.log"), filepath.Join(logdir, "perfevent")}},
			filepath.Join(f.dir, f.Names[i], "pmlogger.out"))
	}
	for i := range f.Hosts {
		meta := filepath.Join(f.Archives, f.Names[i], "perfevent.meta")
		waitFor(t, 15*time.Second, "pmlogger to create "+meta, func() bool {
			_, err := os.Stat(meta)
			return err == nil
		})
	}
	f.startPMProxy(t)
	return f
}

func lookPathIn(env []string, name string) string {
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(path) {
				p := filepath.Join(d, name)
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return p
				}
			}
		}
	}
	return ""
}

// startRedis runs Debian's redis-server on 127.0.0.1 and a free port,
// in memory only (no RDB, no AOF), with its files in the fleet's
// directory.
func (f *Fleet) startRedis(t testing.TB, e *Env) {
	t.Helper()
	f.RedisPort = freePort(t)
	dir := filepath.Join(f.dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.RedisPID = background(t, e.environ(), dir, filepath.Join(dir, "redis.out"),
		lookPathIn(e.environ(), "redis-server"), "--bind", "127.0.0.1", "--port", strconv.Itoa(f.RedisPort),
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"), "--databases", "1")
	waitFor(t, 15*time.Second, "redis-server on port "+strconv.Itoa(f.RedisPort), func() bool {
		out, err := exec.Command(lookPathIn(e.environ(), "redis-cli"), "-h", "127.0.0.1", "-p", strconv.Itoa(f.RedisPort), "ping").Output()
		return err == nil && strings.TrimSpace(string(out)) == "PONG"
	})
}

// startPMProxy runs pmproxy in its time-series mode: REST API, the
// archives' discovery and ingest into the fleet's redis-server. No
// RediSearch (Debian's redis has no such module), no TLS, no redis
// protocol proxying.
func (f *Fleet) startPMProxy(t testing.TB) {
	t.Helper()
	l := f.Hosts[0]
	dir := filepath.Join(f.dir, "pmproxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "pmproxy.conf")
	writeFile(t, config, fmt.Sprintf(`[pmproxy]
pcp.enabled = true
http.enabled = true
redis.enabled = false
secure.enabled = false
[redis]
enabled = true
servers = 127.0.0.1:%d
[discover]
enabled = true
path = %s
[pmsearch]
enabled = false
[pmseries]
enabled = true
stream.expire = 3600
stream.maxlen = 3600
`, f.RedisPort, f.Archives))
	f.ProxyPort = freePort(t)
	f.ProxyPID = l.Background(t, Cmd{
		Args: []string{"pmproxy", "-f", "-A", "-U", "root", "-c", config, "-i", "127.0.0.1",
			"-p", strconv.Itoa(f.ProxyPort), "-s", filepath.Join(dir, "pmproxy.socket"),
			"-l", filepath.Join(dir, "pmproxy.log")},
		Env: []string{"PCP_RUN_DIR=" + dir},
	}, filepath.Join(dir, "pmproxy.out")).Process.Pid
	waitFor(t, 15*time.Second, "pmproxy on port "+strconv.Itoa(f.ProxyPort), func() bool {
		_, err := httpGet(f.URL("/series/ping"))
		return err == nil
	})
}

// URL is pmproxy's address for a REST path.
func (f *Fleet) URL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", f.ProxyPort, path)
}

// PMSeries runs pmseries against the fleet's redis-server.
func (f *Fleet) PMSeries(t testing.TB, args ...string) Result {
	t.Helper()
	return f.Hosts[0].Exec(Cmd{Args: append([]string{"pmseries", "-h", "127.0.0.1", "-p", strconv.Itoa(f.RedisPort)}, args...)})
}

// Logs returns the tails of pmproxy's log and each pmlogger's.
func (f *Fleet) Logs() string {
	var b strings.Builder
	paths := []string{filepath.Join(f.dir, "pmproxy", "pmproxy.log"), filepath.Join(f.dir, "pmproxy", "pmproxy.out")}
	for _, n := range f.Names {
		paths = append(paths, filepath.Join(f.dir, n, "pmlogger.log"))
	}
	for _, p := range paths {
		fmt.Fprintf(&b, "--- %s\n%s", p, tail(p, 15))
	}
	return b.String()
}

// background starts a server outside any lab, in its own process group,
// stopped like Lab.Background when the test ends; it returns the pid.
func background(t testing.TB, env []string, dir, out string, argv ...string) int {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	startStopped(t, cmd, out)
	return cmd.Process.Pid
}

// httpGet fetches a URL, bounded in time, and fails on any status but 200.
func httpGet(u string) ([]byte, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return body, nil
}
