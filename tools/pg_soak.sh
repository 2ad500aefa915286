#!/bin/sh
# pg_soak.sh [--failover] CHAOS-ARGS...: the crash soak of two boxes on a
# throwaway PostgreSQL cluster (tools/pg.sh) on free loopback ports; with
# --failover a synchronous standby too, promoted (and the primary killed)
# once half the orders are in.  The clusters are stopped and removed
# afterwards, whatever the soak did; its exit status is this script's.
set -u
standby=0
if [ "${1:-}" = "--failover" ]; then
	standby=1
	shift
fi
dir=$(mktemp -d /tmp/stagedoor-pgsoak-XXXXXX) || exit 1
chmod 0755 "$dir"
trap 'sh tools/pg.sh stop "$dir/standby"; sh tools/pg.sh stop "$dir/primary"; rm -rf "$dir"' EXIT INT TERM
free_port() { echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000)); }
uri=""
for try in 1 2 3 4 5; do
	uri=$(sh tools/pg.sh start "$dir/primary" "$(free_port)") && break
	uri=""
	rm -rf "$dir/primary"
done
[ -n "$uri" ] || { echo "pg_soak: cannot start a PostgreSQL cluster" >&2; exit 1; }
if [ $standby = 1 ]; then
	uri=""
	for try in 1 2 3 4 5; do
		uri=$(sh tools/pg.sh standby "$dir/primary" "$dir/standby" "$(free_port)") && break
		uri=""
		sh tools/pg.sh stop "$dir/standby"
		rm -rf "$dir/standby"
	done
	[ -n "$uri" ] || { echo "pg_soak: cannot start the standby" >&2; exit 1; }
	build/chaos --pg "$uri" --boxes 2 \
		--failover "sh $(pwd)/tools/pg.sh failover $dir/primary $dir/standby" "$@"
else
	build/chaos --pg "$uri" --boxes 2 "$@"
fi
