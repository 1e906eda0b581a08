#!/bin/sh
# Before pcp-pmda-perfevent-go's files go (dpkg: prerm; rpm: %preun).
# On removal, not on upgrade, the agent is unregistered if it is the one
# pmcd runs; pmcd and its other agents, the C perfevent agent included,
# keep running.

case "$1" in
    remove|0) ;;
    *) exit 0 ;;
esac

if [ -f /etc/pcp.env ]; then
    . /etc/pcp.env
fi
# after pcp.env, which uses names of its own
home=/var/lib/pcp/pmdas/perfevent-go
conf=${PCP_PMCDCONF_PATH:-/etc/pcp/pmcd/pmcd.conf}

if [ -f "$conf" ] && grep -q "^perfevent[ 	].*$home/pmdaperfevent" "$conf"; then
    (cd "$home" && ./Remove </dev/null >/dev/null 2>&1) ||
	echo "pcp-pmda-perfevent-go: Remove failed; unregister it with $home/Remove" >&2
fi
rm -f "$home/.NeedInstall" "$home/.NeedInstall.failed" "$home/.NeedInstall.pending"
exit 0
