package lockwatch

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation"
)

// monoNow is CLOCK_MONOTONIC, which unlike Go's monotonic readings is
// comparable between processes.
func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// helperBench takes and drops the lock on command, the way the holder kind
// does ("c", "ours" or "samefd", see holderKinds): "L" takes it, "U" drops
// it; each answers with the CLOCK_MONOTONIC time right after the syscall.
func helperBench(kind, path string) {
	open := func() int { return helperOpenFile(path) }
	fd := -1
	var r *reservation.Reservation
	if kind == "samefd" {
		fd = open()
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var err error
		switch kind + " " + in.Text() {
		case "c L":
			fd = open()
			err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperReadLock)
		case "c U":
			// C perfalloc's SIGHUP handler unlocks, then closes.
			if err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperUnlock); err == nil {
				err = unix.Close(fd)
			}
		case "ours L":
			r, err = reservation.Reserve(path)
		case "ours U":
			err = r.Release()
		case "samefd L":
			err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperReadLock)
		case "samefd U":
			err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperUnlock)
		}
		if err != nil {
			helperFail(err)
		}
		fmt.Println(monoNow())
	}
	os.Exit(0)
}

// holderKinds are the ways a reservation is taken and dropped.
var holderKinds = []struct{ name, what string }{
	{"c", "C perfalloc: open, F_SETLK; F_SETLK unlock, close"},
	{"ours", "our perfalloc: Reserve, Release"},
	{"samefd", "the file kept open: F_SETLK read lock, F_SETLK unlock, no inotify event"},
}

// helperSpin burns a CPU until it is killed.
func helperSpin() {
	for x := uint64(1); ; x = x*6364136223846793005 + 1442695040888963407 {
		if x == 0 {
			fmt.Println(x)
		}
	}
}

// spinners starts one busy process per CPU, at normal priority, and
// returns a function that stops them.
func spinners(b *testing.B) func() {
	var cmds []*exec.Cmd
	for range runtime.NumCPU() {
		cmd := helperCommand("spin", "")
		// Gone with the benchmark, however it ends.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	return func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
}

// wakeLateness measures, until stop, how late a 1 ms sleep of this process
// ends, every 10 ms or so: no watcher here can react faster than it is
// woken. It sends the lateness, sorted, in milliseconds.
func wakeLateness(stop <-chan struct{}, out chan<- []float64) {
	var late []float64
	for {
		select {
		case <-stop:
			slices.Sort(late)
			out <- late
			return
		default:
		}
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		late = append(late, float64(time.Since(t0)-time.Millisecond)/1e6)
		time.Sleep(time.Duration(5+rand.N(10)) * time.Millisecond)
	}
}

// BenchmarkReaction measures each holder kind with the watcher's defaults
// on the machine as it is; BenchmarkReactionBusy does the same while one
// busy process per CPU competes with the watcher and the holder. Run them
// with -benchtime=200x or more: every cycle sleeps up to 2 × 100 ms. The
// "wake" figures are how late a 1 ms sleep of the same process ended
// meanwhile, the floor of any reaction.
func BenchmarkReaction(b *testing.B)     { benchHolders(b, false) }
func BenchmarkReactionBusy(b *testing.B) { benchHolders(b, true) }

func benchHolders(b *testing.B, busy bool) {
	for _, k := range holderKinds {
		b.Run(k.name, func(b *testing.B) {
			if busy {
				defer spinners(b)()
			}
			stop := make(chan struct{})
			late := make(chan []float64)
			go wakeLateness(stop, late)
			lock, unlock := reaction(b, k.name, Options{})
			close(stop)
			wake := <-late
			for _, d := range []struct {
				name string
				lat  []float64
			}{{"lock", lock}, {"unlock", unlock}, {"wake", wake}} {
				b.ReportMetric(d.lat[len(d.lat)/2], d.name+"-ms-p50")
				b.ReportMetric(d.lat[(len(d.lat)*99)/100], d.name+"-ms-p99")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func BenchmarkReactionFsnotify(b *testing.B) { benchReaction(b, Options{}) }
func BenchmarkReactionPoll(b *testing.B)     { benchReaction(b, Options{NoNotify: true}) }

// benchReaction reports the median and 99th percentile of both directions
// together, in milliseconds, for a holder like C perfalloc.
func benchReaction(b *testing.B, opts Options) {
	lock, unlock := reaction(b, "c", opts)
	lat := append(lock, unlock...)
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "ms-median")
	b.ReportMetric(lat[(len(lat)*99)/100], "ms-p99")
	b.ReportMetric(0, "ns/op") // the sleeps make ns/op meaningless
}

// reaction measures, b.N times, the time from a helper process of the
// holder kind taking the lock to the Watcher's callback, and from its
// dropping the lock to the next callback; it returns both, sorted, in
// milliseconds.
func reaction(b *testing.B, kind string, opts Options) (lock, unlock []float64) {
	path, lf := tempLockFile(b)
	seen := make(chan int64, 16)
	w, err := Watch(lf, opts, func(Status) { seen <- monoNow() })
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	<-seen // the initial status

	cmd := helperCommand("bench-"+kind, path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReader(stdout)

	step := func(op string, lat *[]float64) {
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
			*lat = append(*lat, float64(cb-at)/1e6)
		case <-time.After(5 * time.Second):
			b.Fatalf("no callback 5 s after %s", op)
		}
	}
	b.ResetTimer()
	for range b.N {
		step("L", &lock)
		step("U", &unlock)
	}
	b.StopTimer()
	slices.Sort(lock)
	slices.Sort(unlock)
	return lock, unlock
}
