package metrics

import (
	"fmt"
	"time"

	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
)

// Reservation is what perfevent.reservation.* serves: who holds perfalloc's
// lock, since when, and how often and how long the counters were held.
type Reservation struct {
	Held    bool          // some process holds the lock
	Since   time.Time     // when the current reservation began; zero if none
	Count   uint64        // reservations since the agent started
	Total   time.Duration // time held in all, the current reservation included
	Expired uint64        // reservations whose counters resumed at the maximum hold
	MaxHold time.Duration // the maximum hold; 0 when there is none
	Holders []Holder
}

// Holder is one process holding the lock.
type Holder struct {
	PID     int
	UID     int // -1 if unknown
	Command string
	Since   time.Time // when the agent first saw it hold the lock
}

// HolderInstance is a holder's instance: its pid, named "PID COMMAND" as
// PCP's proc metrics name processes.
func HolderInstance(h Holder) pmda.Instance {
	return pmda.Instance{ID: int32(h.PID), Name: fmt.Sprintf("%06d %s", h.PID, h.Command)}
}

// ReservationReader gives the reservation's state at the moment of a
// fetch; it must not wait for reloads or for the lock watcher.
type ReservationReader interface {
	Reservation(into *Reservation)
}

// Reservations describes perfevent.reservation.* for the table: the
// reader and the live instance domain of the holders (HolderInstance).
type Reservations struct {
	Reader  ReservationReader
	Holders *pmda.Instances
}

// Items of the reservation cluster.
const (
	itemResvHeld = iota
	itemResvSeconds
	itemResvCount
	itemResvTotal
	itemResvExpired
	itemResvMaxHold
	itemResvHolders
	itemHolderPID
	itemHolderUID
	itemHolderCommand
	itemHolderSeconds

	reservationMetrics // how many metrics addReservation adds
)

var (
	unitsSeconds = pdu.NewUnits(0, 1, 0, 0, pdu.TimeSec, 0)
)

// addReservation adds perfevent.reservation.*, numbered from the map's
// "reservation" cluster, its holders' instance domain from the same one.
func (s *Source) addReservation(ts *pmda.TableSpec, r *Reservations, clusters *Clusters) error {
	cluster, err := clusters.Cluster("reservation")
	if err != nil {
		return err
	}
	indom := pdu.NewInDom(Domain, cluster-firstDynamic)
	ts.InDoms = append(ts.InDoms, pmda.InDom{
		InDom:   indom,
		Live:    r.Holders,
		Labels:  pmda.Labels{"indom_name": "perfalloc holder"},
		OneLine: "processes holding perfalloc's lock on the counters",
		Help:    "The processes that hold a read lock on perfalloc's lock file, by pid,\nnamed \"PID COMMAND\".",
	})
	scalar := func(item int, name string, t pdu.ValueType, sem pdu.Sem, units pdu.Units, one, help string) {
		ts.Metrics = append(ts.Metrics, pmda.Metric{
			Name:     "perfevent.reservation." + name,
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, item), Type: t, InDom: pdu.InDomNull, Sem: sem, Units: units},
			OneLine:  one,
			MakeHelp: func() string { return wrap(help) },
		})
	}
	holder := func(item int, name string, t pdu.ValueType, units pdu.Units, one, help string) {
		ts.Metrics = append(ts.Metrics, pmda.Metric{
			Name:     "perfevent.reservation.holder." + name,
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, item), Type: t, InDom: indom, Sem: pdu.SemInstant, Units: units},
			OneLine:  one,
			MakeHelp: func() string { return wrap(help) },
		})
	}
	scalar(itemResvHeld, "held", pdu.ValueUint32, pdu.SemInstant, pdu.UnitsNone,
		"1 while a process holds perfalloc's lock, else 0",
		"1 while some process holds a read lock on perfalloc's lock file, which stops the agent's counting (see perfevent.active), else 0. It stays 1 after the maximum hold has resumed counting, until the lock is let go.")
	scalar(itemResvSeconds, "seconds", pdu.ValueDouble, pdu.SemInstant, unitsSeconds,
		"how long the current reservation has been held",
		"Seconds since the current reservation began (since some process took perfalloc's lock while nobody held it); 0 when nobody holds it. A pmie rule can alert when it passes a bound (the agent ships one: perfevent-reservation.pmie).")
	scalar(itemResvCount, "count", pdu.ValueUint64, pdu.SemCounter, pdu.UnitsCount,
		"reservations since the agent started",
		"The number of times the counters went from unreserved to reserved since the agent started.")
	scalar(itemResvTotal, "total", pdu.ValueDouble, pdu.SemCounter, unitsSeconds,
		"seconds the counters were reserved since the agent started",
		"The time perfalloc's lock was held since the agent started, the current reservation included: its rate is the fraction of time the counters were held.")
	scalar(itemResvExpired, "expired", pdu.ValueUint64, pdu.SemCounter, pdu.UnitsCount,
		"reservations whose counting resumed at the maximum hold",
		"The number of reservations that lasted the agent's maximum hold (pmdaperfevent -max-hold), after which it resumed counting although the lock was still held.")
	scalar(itemResvMaxHold, "max_hold", pdu.ValueDouble, pdu.SemDiscrete, unitsSeconds,
		"the maximum hold, after which counting resumes; 0 for none",
		"The agent's maximum hold in seconds (pmdaperfevent -max-hold): a reservation held longer has counting resumed, and the log says so. 0, the default, means that a reservation lasts as long as its holder, as with the C agent.")
	scalar(itemResvHolders, "holders", pdu.ValueUint32, pdu.SemInstant, pdu.UnitsNone,
		"the number of processes holding perfalloc's lock",
		"The number of processes holding a read lock on perfalloc's lock file now; the instances of perfevent.reservation.holder.* name them.")
	holder(itemHolderPID, "pid", pdu.ValueUint32, pdu.UnitsNone,
		"process id of a holder of perfalloc's lock",
		"The process id of each process holding perfalloc's lock.")
	holder(itemHolderUID, "uid", pdu.ValueUint32, pdu.UnitsNone,
		"real user id of a holder of perfalloc's lock",
		"The real user id of each process holding perfalloc's lock, from /proc/PID/status; no value if the process was gone before the agent could look.")
	holder(itemHolderCommand, "command", pdu.ValueString, pdu.UnitsNone,
		"command name of a holder of perfalloc's lock",
		"The command name (/proc/PID/comm) of each process holding perfalloc's lock.")
	holder(itemHolderSeconds, "seconds", pdu.ValueDouble, unitsSeconds,
		"how long each holder has held perfalloc's lock",
		"Seconds since the agent first saw each process hold perfalloc's lock.")
	s.resv = r.Reader
	s.setRef(cluster, ref{kind: kindReservation})
	return nil
}

// reservationValues answers one metric of perfevent.reservation.* from
// the fetch's snapshot.
func (s *Source) reservationValues(item int, w *pmda.ValueWriter) error {
	r := &s.resvSnap
	secs := func(d time.Duration) float64 { return d.Seconds() }
	switch item {
	case itemResvHeld:
		v := uint32(0)
		if r.Held {
			v = 1
		}
		w.Uint32(pdu.InNull, v)
	case itemResvSeconds:
		v := 0.0
		if r.Held && !r.Since.IsZero() {
			v = secs(s.resvNow.Sub(r.Since))
		}
		w.Double(pdu.InNull, v)
	case itemResvCount:
		w.Uint64(pdu.InNull, r.Count)
	case itemResvTotal:
		w.Double(pdu.InNull, secs(r.Total))
	case itemResvExpired:
		w.Uint64(pdu.InNull, r.Expired)
	case itemResvMaxHold:
		w.Double(pdu.InNull, secs(r.MaxHold))
	case itemResvHolders:
		w.Uint32(pdu.InNull, uint32(len(r.Holders)))
	case itemHolderPID, itemHolderUID, itemHolderCommand, itemHolderSeconds:
		for _, h := range r.Holders {
			id := int32(h.PID)
			switch item {
			case itemHolderPID:
				w.Uint32(id, uint32(h.PID))
			case itemHolderUID:
				if h.UID >= 0 {
					w.Uint32(id, uint32(h.UID))
				}
			case itemHolderCommand:
				w.String(id, h.Command)
			case itemHolderSeconds:
				w.Double(id, secs(s.resvNow.Sub(h.Since)))
			}
		}
	default:
		return pdu.ErrPMID
	}
	return nil
}
