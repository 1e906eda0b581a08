package qa

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestBenchRunsVMConfig: qa/bench/pcpbench.py runs both agents with
// VMConfig, read from the file the qa package embeds, and holds no
// perfevent.conf of its own that could drift from it.
func TestBenchRunsVMConfig(t *testing.T) {
	bench := filepath.Join(repoRoot(), "qa", "bench", "pcpbench.py")
	src, err := os.ReadFile(bench)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\[(perf|dynamic|[a-z_]+:derived)\]$`).Find(src); m != nil {
		t.Errorf("%s holds a perfevent.conf section of its own (%s); it must read testdata/vm.conf", bench, m)
	}
	py := "/usr/bin/python3" // Debian's: it has the pcp module that pcpbench.py imports
	if err := exec.Command(py, "-c", "import pcp.pmapi").Run(); err != nil {
		t.Skipf("needs %s with PCP's python module (python3-pcp) to run pcpbench.py: %v", py, err)
	}
	out, err := exec.Command(py, bench, "--print-config").Output()
	if err != nil {
		t.Fatalf("%s --print-config: %v", bench, err)
	}
	if string(out) != VMConfig {
		t.Errorf("%s --print-config:\n%s\nwant VMConfig:\n%s", bench, out, VMConfig)
	}
}
