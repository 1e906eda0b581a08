package qa

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An arm64 machine with a hardware PMU, emulated: QEMU's Neoverse N1 has
// an ARMv8 PMU (armv8_pmuv3), which Debian's arm64 kernel drives. The test
// boots that kernel with an initramfs holding busybox and package pfm's
// test binary built for arm64, and runs TestKernelAcceptsARMCatalog inside:
// every arm_n1 event of the catalog, as Encode encodes it, is opened by a
// real kernel, and CPU_CYCLES and INST_RETIRED count. Instructions count
// only with a fixed -icount, hence shift=0.
//
// scripts/setup installs qemu-system-arm and fetches the kernel and
// busybox (Debian's linux-image-arm64 and busybox-static) into
// $PERFEVENT_ARMVM_DIR (default /var/cache/perfevent-armvm).
func TestARMVMKernelAcceptsCatalog(t *testing.T) {
	if testing.Short() {
		t.Skip("boots an emulated arm64 machine; skipped with -short")
	}
	qemu, err := exec.LookPath("qemu-system-aarch64")
	if err != nil {
		unmet(t, "needs qemu-system-aarch64 (Debian package qemu-system-arm)")
	}
	dir := os.Getenv("PERFEVENT_ARMVM_DIR")
	if dir == "" {
		dir = "/var/cache/perfevent-armvm"
	}
	kernel, busybox := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "busybox")
	for _, f := range []string{kernel, busybox} {
		if _, err := os.Stat(f); err != nil {
			unmet(t, "needs Debian's arm64 kernel and busybox in %s (scripts/setup fetches them): %v", dir, err)
		}
	}

	work := t.TempDir()
	test := filepath.Join(work, "pfm.test")
	build := exec.Command("go", "test", "-c", "-o", test, "./internal/pfm")
	build.Dir = repoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c for arm64: %v\n%s", err, out)
	}
	initrd := filepath.Join(work, "initrd.gz")
	if err := writeInitramfs(initrd, map[string]string{"bin/busybox": busybox, "bin/pfm.test": test}, vmInit); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	vm := exec.CommandContext(ctx, qemu, "-M", "virt", "-cpu", "neoverse-n1", "-smp", "2", "-m", "1024",
		"-nographic", "-no-reboot", "-nic", "none", "-icount", "shift=0",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyAMA0 panic=-1 quiet")
	out, err := vm.CombinedOutput()
	t.Logf("the VM ran %.1f s", time.Since(start).Seconds())
	console := string(out)
	for _, l := range strings.Split(console, "\n") {
		if strings.Contains(l, "armkernel_test.go") || strings.HasPrefix(l, "CPU ") {
			t.Log(strings.TrimSpace(l))
		}
	}
	if err != nil || !strings.Contains(console, "--- PASS: TestKernelAcceptsARMCatalog") || !strings.Contains(console, "=== exit 0") {
		t.Fatalf("qemu: %v; the console:\n%s", err, console)
	}
}

// vmInit is the initramfs's /init: busybox's tools, the kernel's
// filesystems, the test, and power off.
const vmInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
grep -m2 -E "CPU implementer|CPU part" /proc/cpuinfo
cd /tmp && /bin/pfm.test -test.run '^TestKernelAcceptsARMCatalog$' -test.v -test.count=1
echo "=== exit $?"
poweroff -f
`

// writeInitramfs writes a gzipped newc cpio archive (the kernel's
// initramfs format) holding /init, the files given (archive path to host
// path) and the directories the init needs.
func writeInitramfs(path string, files map[string]string, init string) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	ino := 0
	add := func(name string, mode uint32, data []byte) {
		ino++
		fmt.Fprintf(zw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		io.WriteString(zw, name+"\x00")
		zw.Write(make([]byte, pad4(110+len(name)+1)))
		zw.Write(data)
		zw.Write(make([]byte, pad4(len(data))))
	}
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp"} {
		add(d, 0o040755, nil)
	}
	add("init", 0o100755, []byte(init))
	for name, host := range files {
		data, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		add(name, 0o100755, data)
	}
	add("TRAILER!!!", 0, nil)
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func pad4(n int) int { return (4 - n%4) % 4 }
