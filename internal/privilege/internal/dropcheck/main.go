// Command dropcheck drops to a user with privilege.Drop and then tries to
// open a system-wide counter, for the package's tests: credentials cannot
// be restored, so the drop happens in a process of its own.
package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"perfevent/internal/perf"
	"perfevent/internal/privilege"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dropcheck USER")
		os.Exit(2)
	}
	if os.Args[1] != "-" {
		id, err := privilege.Drop(os.Args[1], privilege.CounterCapability())
		if err != nil {
			fmt.Println("drop:", err)
			os.Exit(1)
		}
		fmt.Printf("dropped to %s uid %d keeping %s\n", id.User, id.UID, privilege.Name(id.Capability))
	}
	st, err := privilege.ReadStatus(0)
	if err != nil {
		fmt.Println("status:", err)
		os.Exit(1)
	}
	fmt.Printf("uids %v capeff %#x capprm %#x capinh %#x nonewprivs %v\n", st.UIDs, st.CapEff, st.CapPrm, st.CapInh, st.NoNewPrivs)
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	attr.Size = perf.AttrSize
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		fmt.Println("perf_event_open on cpu0:", err)
		return
	}
	unix.Close(fd)
	fmt.Println("perf_event_open on cpu0: ok")
}
