#!/bin/sh
# After pcp-pmda-perfevent-go is unpacked (dpkg: configure; rpm: %post).
#
# A fresh install registers nothing with pmcd unless the site asked for it:
#   PERFEVENT_GO_REGISTER=yes in the environment of dpkg or rpm, or
#   REGISTER=yes in /etc/default/pcp-pmda-perfevent-go (Debian) or
#   /etc/sysconfig/pcp-pmda-perfevent-go (Fedora, RHEL).
# Then, as PCP's own packages do, a .NeedInstall marker asks pmcd's rc
# script to run Install at pmcd's next start; if pmcd runs now, Install
# runs at once. An upgrade of a registered agent restarts it under pmcd
# with the new binary, keeping its IPC settings and its PMIDs.

if [ -f /etc/pcp.env ]; then
    . /etc/pcp.env
fi
# after pcp.env, which uses names of its own
home=/var/lib/pcp/pmdas/perfevent-go
conf=${PCP_PMCDCONF_PATH:-/etc/pcp/pmcd/pmcd.conf}

registered()
{
    [ -f "$conf" ] && grep -q "^perfevent[ 	].*$home/pmdaperfevent" "$conf"
}

pmcd_running()
{
    [ -x "${PCP_BINADM_DIR:-/usr/lib/pcp/bin}/pmcd" ] || return 1
    pmprobe pmcd.version >/dev/null 2>&1
}

wanted()
{
    case "${PERFEVENT_GO_REGISTER:-}" in
	[yY]*|1|true) return 0 ;;
	[nN]*|0|false) return 1 ;;
    esac
    for f in /etc/default/pcp-pmda-perfevent-go /etc/sysconfig/pcp-pmda-perfevent-go; do
	if [ -f "$f" ] && grep -qiE '^[[:space:]]*REGISTER=("|'"'"')?(yes|1|true)' "$f"; then
	    return 0
	fi
    done
    return 1
}

if registered; then
    # The old binary still runs; once it is gone, pmcd starts the new one
    # on SIGHUP, with the pmcd.conf line Install wrote.
    if pmcd_running; then
	pkill -TERM -x -f "$home/pmdaperfevent.*" 2>/dev/null || true
	i=0
	while [ $i -lt 50 ] && pgrep -x -f "$home/pmdaperfevent.*" >/dev/null 2>&1; do
	    sleep 0.1
	    i=`expr $i + 1`
	done
	"${PCP_BINADM_DIR:-/usr/lib/pcp/bin}/pmsignal" -a -s HUP pmcd >/dev/null 2>&1 || true
	echo "pcp-pmda-perfevent-go: restarted the perfevent agent under pmcd"
    fi
elif wanted; then
    touch "$home/.NeedInstall"
    if pmcd_running; then
	if (cd "$home" && ./Install </dev/null >/dev/null 2>&1); then
	    rm -f "$home/.NeedInstall"
	    echo "pcp-pmda-perfevent-go: registered the perfevent agent with pmcd"
	else
	    mv -f "$home/.NeedInstall" "$home/.NeedInstall.failed"
	    echo "pcp-pmda-perfevent-go: Install failed; pmcd retries it at its next start" >&2
	fi
    else
	echo "pcp-pmda-perfevent-go: pmcd will register the agent at its next start"
    fi
else
    echo "pcp-pmda-perfevent-go: not registered with pmcd; to serve perfevent.* from it:"
    echo "    cd $home && ./Install"
fi
exit 0
