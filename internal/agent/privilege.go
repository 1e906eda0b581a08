package agent

import (
	"os"
	"path/filepath"

	"perfevent/internal/metrics"
	"perfevent/internal/privilege"
)

// runAs says which user the agent will run as after start-up: -U, by
// default $PCP_USER, and with drop that user's account, for
// dropPrivileges. drop is false when it stays as it is: already not root,
// told to stay root, or the user does not exist.
func (a *Agent) runAs() (uid, gid int, acct privilege.Account, drop bool) {
	uid, gid = os.Geteuid(), os.Getegid()
	// Each lookup reads /etc/passwd and /etc/group: the -U user's serves
	// agentUsers too.
	var err error
	if a.o.User != "" && a.o.User != "root" {
		acct, err = privilege.LookupAccount(a.o.User)
	}
	a.trusted = a.agentUsers(acct, err)
	if uid != 0 || a.o.User == "" || a.o.User == "root" {
		return uid, gid, acct, false
	}
	if err != nil {
		a.log.Warningf("-U %s: %v; staying root", a.o.User, err)
		return uid, gid, acct, false
	}
	u, g := acct.UID, acct.GID
	a.trusted = append(a.trusted, u)
	// The PMID map is rewritten when a reload adds names, as that user:
	// its directory becomes the user's if it is the agent's own (the
	// default one, or one it makes now), never some existing directory
	// that --pmids happens to name.
	dir := filepath.Dir(a.o.PMIDs)
	_, statErr := os.Stat(dir)
	if err := metrics.PrepareMapDir(a.o.PMIDs, u, g, statErr != nil || dir == filepath.Dir(a.o.DefaultPMIDs), a.trusted...); err != nil {
		a.log.Warningf("%v; the agent may not be able to save new PMIDs after a reload", err)
	}
	return u, g, acct, true
}

// agentUsers are the uids that an earlier run of the agent may have left
// its files to: $PCP_USER's and the -U user's. Root adopts what they own in
// the agent's own directories, so that a change of -U in pmcd.conf (to
// root, or to another user) keeps the PMIDs and the state directory.
// user is the -U user's account as looked up, with the lookup's error.
func (a *Agent) agentUsers(user privilege.Account, userErr error) []int {
	var uids []int
	for _, name := range []string{a.o.PCPUser, a.o.User} {
		if name == "" || name == "root" {
			continue
		}
		acct, err := user, userErr
		if name != a.o.User {
			acct, err = privilege.LookupAccount(name)
		}
		if err == nil && acct.UID != 0 {
			uids = append(uids, acct.UID)
		}
	}
	return uids
}

// dropPrivileges makes the agent run as the -U user with only the
// capability it needs to reopen counters, as a modern kernel allows; the C
// agent gives up everything and can never reopen them. If that cannot be
// done the agent stays root and says why. acct is the -U user's, from
// runAs.
func (a *Agent) dropPrivileges(acct privilege.Account) {
	c := privilege.CounterCapability()
	id, err := acct.Drop(c)
	if err != nil {
		if os.Geteuid() == 0 {
			a.log.Warningf("cannot run as %s with %s: %v; staying root", a.o.User, privilege.Name(c), err)
		} else {
			a.log.Errorf("dropping privileges failed part way: %v; counters may not reopen after perfalloc", err)
		}
		return
	}
	// One thread's credentials stand for all: the runtime makes each
	// all-thread call on every thread and stops the process if any
	// thread's result differs. (The privilege tests read every thread's;
	// here that would cost a /proc read per thread at every start.) The
	// kernel's system calls answer for this one: /proc/self/status cost
	// more than all of them together.
	st, err := privilege.Self()
	if err != nil || !st.Dropped(acct, c) {
		a.log.Warningf("after dropping privileges the kernel reports uids %v gids %v groups %v CapEff %#x CapPrm %#x CapInh %#x CapAmb %#x NoNewPrivs %v (err %v)",
			st.UIDs, st.GIDs, st.Groups, st.CapEff, st.CapPrm, st.CapInh, st.CapAmb, st.NoNewPrivs, err)
		return
	}
	a.log.Infof("running as %s (uid %d, gid %d) with %s only", id.User, acct.UID, acct.GID, privilege.Name(c))
}
