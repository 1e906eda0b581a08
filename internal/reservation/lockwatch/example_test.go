package lockwatch_test

import (
	"log"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/lockwatch"
)

// The agent's side: open the lock file once, report in the state file, and
// close or reopen the counters whenever the reservation changes. The first
// callback comes before Watch returns, with the state at start-up.
func Example_agent() {
	lockPath := reservation.DefaultLockPath()
	lf, err := reservation.Open(lockPath)
	if err != nil {
		log.Fatal(err) // names the file and what to do
	}
	defer lf.Close()

	sf, err := reservation.NewStateFile(reservation.StatePath(lockPath), reservation.State{
		Program:  "pmdaperfevent",
		Config:   "/etc/pcp/perfevent/perfevent.conf",
		LockFile: lockPath,
		Counters: reservation.CountersOpen,
	}, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer sf.Close() // removes the file: a stopped agent reports nothing

	w, err := lockwatch.Watch(lf, lockwatch.Options{}, func(st reservation.Status) {
		// Runs on the watcher's goroutine: close the counters first, then
		// report, because perfalloc trusts the report.
		counters := reservation.CountersOpen
		if st.Reserved {
			counters = reservation.CountersReleased
			// closeCounters()
		} else {
			// reopenCounters()
		}
		err := sf.Update(func(s *reservation.State) {
			s.Counters, s.Since, s.Holders = counters, st.Since, st.Holders
			// s.Events = ... one EventState per configured event
		})
		if err != nil {
			log.Print(err)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	// ... serve pmcd ...
}
