package agent

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"perfevent/internal/hostfs"
	"perfevent/internal/metrics"
	"perfevent/internal/pmda"
	"perfevent/internal/reservation"
)

// holds is perfalloc's reservations as perfevent.reservation.* serves them.
// It has a lock of its own: a fetch must not wait for a reload or for the
// release of the counters, which hold the agent's.
type holds struct {
	mu        sync.Mutex
	r         metrics.Reservation // its Holders are its own
	instances *pmda.Instances     // the holders' instance domain
	fs        hostfs.FS           // its procfs is where holders are looked up
}

func newHolds(maxHold time.Duration, fs hostfs.FS) *holds {
	return &holds{instances: pmda.NewInstances(), r: metrics.Reservation{MaxHold: maxHold}, fs: fs}
}

// Reservation implements metrics.ReservationReader.
func (h *holds) Reservation(into *metrics.Reservation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	holders := into.Holders[:0]
	*into = h.r
	into.Holders = append(holders, h.r.Holders...)
	if h.r.Held {
		into.Total += time.Since(h.r.Since)
	}
}

// update records what the lock watcher saw at now: a reservation that
// begins or ends, and holders that come and go. A holder's uid and command
// are read from /proc once, when it is first seen.
func (h *holds) update(s reservation.Status, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case s.Reserved && !h.r.Held:
		h.r.Held, h.r.Since = true, now
		h.r.Count++
	case !s.Reserved && h.r.Held:
		h.r.Total += now.Sub(h.r.Since)
		h.r.Held, h.r.Since = false, time.Time{}
	}
	pids := s.Holders
	if !s.Reserved {
		pids = nil
	}
	same := len(pids) == len(h.r.Holders)
	for i := 0; same && i < len(pids); i++ {
		same = pids[i] == h.r.Holders[i].PID
	}
	if same {
		return
	}
	next := make([]metrics.Holder, 0, len(pids))
	list := make([]pmda.Instance, 0, len(pids))
	for _, pid := range pids {
		i := slices.IndexFunc(h.r.Holders, func(o metrics.Holder) bool { return o.PID == pid })
		var hd metrics.Holder
		if i >= 0 {
			hd = h.r.Holders[i]
		} else {
			hd = h.lookup(pid, now)
		}
		next = append(next, hd)
		list = append(list, metrics.HolderInstance(hd))
	}
	h.r.Holders = next
	h.instances.Set(list)
}

// expired counts a reservation whose counting resumed at the maximum hold.
func (h *holds) expired() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.r.Expired++
}

// who names the holders for the log: "pid 123 (uid 1000, perfalloc)".
func (h *holds) who() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.r.Holders) == 0 {
		return "holders unknown"
	}
	var parts []string
	for _, hd := range h.r.Holders {
		parts = append(parts, fmt.Sprintf("pid %d (uid %d, %s)", hd.PID, hd.UID, hd.Command))
	}
	return strings.Join(parts, ", ")
}

// lookup reads a holder's real uid and command name. A process gone
// already keeps uid -1 and the command "?".
func (h *holds) lookup(pid int, now time.Time) metrics.Holder {
	hd := metrics.Holder{PID: pid, UID: -1, Command: "?", Since: now}
	dir := h.fs.ProcPath(strconv.Itoa(pid))
	if b, err := os.ReadFile(dir + "/comm"); err == nil {
		if c := strings.TrimSpace(string(b)); c != "" {
			hd.Command = c
		}
	}
	if b, err := os.ReadFile(dir + "/status"); err == nil {
		for line := range bytes.Lines(b) {
			if rest, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
				if f := strings.Fields(string(rest)); len(f) > 0 {
					if uid, err := strconv.Atoi(f[0]); err == nil {
						hd.UID = uid
					}
				}
				break
			}
		}
	}
	return hd
}
