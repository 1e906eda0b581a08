package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"perfevent/internal/testexec"
)

// Every package linked into the agent runs its initialisation at every
// start, before main, whether the agent uses it or not. These cost a start
// more than their use is worth, and the agent does without them:
// runtime/metrics builds its table of descriptions (the SIGUSR1 line reads
// runtime.ReadMemStats); regexp makes unicode build its tables of
// categories and scripts (the few names the agent checks are matched by
// hand, the vendors' CPUID patterns are expanded by their generator); net
// and net/netip set up resolvers and unique handles (the sockets for pmcd
// are system calls served through os.File). github.com/cilium/ebpf
// brought its ELF and BTF readers' dependencies (debug/elf and dwarf,
// compress/zlib, go/format and the parser, encoding/xml, crypto, math/big,
// os/exec), whose inits were most of what ran before main: internal/bpf
// makes the few calls bpfcount needs instead.
func TestAgentLinksNoCostlyInit(t *testing.T) {
	cmd := exec.Command(testexec.Go(), "list", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("needs the go command to list the agent's packages: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		imports[pkg] = strings.Fields(deps)
	}
	if len(imports) < 50 || imports["perfevent/pmda"] == nil {
		t.Fatalf("go list gave %d packages, without the agent's:\n%s", len(imports), out)
	}
	// Each of these, and every package below one ending in /.
	costly := []string{"runtime/metrics", "regexp", "net", "net/netip",
		"github.com/cilium/ebpf/", "go/", "encoding/xml", "debug/elf", "debug/dwarf",
		"compress/zlib", "internal/zstd", "os/exec", "crypto/", "math/big", "text/tabwriter"}
	var linked []string
	for pkg := range imports {
		for _, c := range costly {
			if pkg == strings.TrimSuffix(c, "/") || strings.HasSuffix(c, "/") && strings.HasPrefix(pkg, c) {
				linked = append(linked, pkg)
				break
			}
		}
	}
	slices.Sort(linked)
	for _, unwanted := range linked {
		var by []string
		for pkg, deps := range imports {
			for _, d := range deps {
				if d == unwanted {
					by = append(by, pkg)
				}
			}
		}
		slices.Sort(by)
		// Only where the costly packages come in: those that only
		// others of them import follow.
		if !slices.ContainsFunc(by, func(p string) bool { return !slices.Contains(linked, p) }) {
			continue
		}
		t.Errorf("the agent links %s (imported by %s), whose initialisation every start pays for (%d costly packages linked in all)", unwanted, strings.Join(by, ", "), len(linked))
	}
}
