#!/bin/sh
# After pcp-pmda-perfevent-go's files are gone (dpkg: postrm; rpm: %postun).
# dpkg's purge removes what the agent made beside them: its directory's
# leftovers (perfevent.conf.new and .prev, ratios.conf) and its PMID map.
# rpm has no purge: an erase leaves edited configuration as .rpmsave, and
# the PMID map stays so that a reinstall keeps the archives' numbers.

case "$1" in
    purge) ;;
    *) exit 0 ;;
esac

if [ -f /etc/pcp.env ]; then
    . /etc/pcp.env
fi
# after pcp.env, which uses names of its own
home=/var/lib/pcp/pmdas/perfevent-go
rm -rf "$home"
map=${PCP_VAR_DIR:-/var/lib/pcp}/config/perfevent
rm -f "$map/pmids" "$map/pmids.prev"
rmdir "$map" 2>/dev/null || true
exit 0
