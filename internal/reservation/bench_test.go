package reservation

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// monoNow is CLOCK_MONOTONIC, which unlike Go's monotonic readings is
// comparable between processes.
func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// helperBench behaves like a perfalloc run per command: "L" opens the lock
// file and takes the read lock, "U" closes it; each answers with the
// CLOCK_MONOTONIC time right after the syscall.
func helperBench(path string) {
	in := bufio.NewScanner(os.Stdin)
	fd := -1
	for in.Scan() {
		switch in.Text() {
		case "L":
			var err error
			fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
				err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
			}
			if err != nil {
				fmt.Println("error:", err)
				os.Exit(2)
			}
		case "U":
			unix.Close(fd)
		}
		fmt.Println(monoNow())
	}
	os.Exit(0)
}

func BenchmarkReactionFsnotify(b *testing.B) { benchReaction(b, Options{}) }
func BenchmarkReactionPoll(b *testing.B)     { benchReaction(b, Options{NoNotify: true}) }

// benchReaction measures the time from a helper process taking (or
// dropping) the lock to the Watcher's callback, and reports the median and
// 99th percentile of both directions together, in milliseconds.
func benchReaction(b *testing.B, opts Options) {
	path := filepath.Join(b.TempDir(), "perflock")
	lf, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer lf.Close()
	seen := make(chan int64, 16)
	w, err := Watch(lf, opts, func(Status) { seen <- monoNow() })
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	<-seen // the initial status

	cmd := helperCommand("bench", path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReader(stdout)

	var lat []float64
	step := func(op string) {
		// Land at a random phase of the poll, as a real user would.
		time.Sleep(rand.N(DefaultPoll))
		fmt.Fprintln(stdin, op)
		line, err := out.ReadString('\n')
		at, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil || perr != nil {
			b.Fatalf("helper: %q %v", line, err)
		}
		select {
		case cb := <-seen:
			lat = append(lat, float64(cb-at)/1e6)
		case <-time.After(5 * time.Second):
			b.Fatalf("no callback 5 s after %s", op)
		}
	}
	b.ResetTimer()
	for range b.N {
		step("L")
		step("U")
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "ms-median")
	b.ReportMetric(lat[(len(lat)*99)/100], "ms-p99")
	b.ReportMetric(0, "ns/op") // the sleeps make ns/op meaningless
}
