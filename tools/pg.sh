#!/bin/sh
# pg.sh: a throwaway PostgreSQL 15 cluster for tests and benchmarks.
#
#   tools/pg.sh start DIR [PORT]   initdb DIR/data (if new) and start it on
#                                  127.0.0.1:PORT (default 54329), sockets in DIR;
#                                  prints the base URI (postgresql://...)
#   tools/pg.sh stop DIR           stop it (fast shutdown)
#   tools/pg.sh uri DIR            the URI of a started cluster
#   tools/pg.sh standby PDIR DIR PORT
#                                  a synchronous standby of the cluster in PDIR:
#                                  pg_basebackup into DIR/data, streaming, named
#                                  standby1 in the primary's synchronous_standby_names
#                                  (every commit that waits for durability waits for
#                                  both machines); prints the two-host URI with
#                                  target_session_attrs=read-write
#   tools/pg.sh failover PDIR DIR  kill the primary (immediate: as a lost machine)
#                                  and promote the standby in DIR
#
# As root the cluster runs as the unprivileged user "postgres" (Debian's
# postgresql package makes it): PostgreSQL refuses to run as root.  DIR is
# made for that user.  The cluster trusts connections from this machine
# only: it listens on loopback and on a socket in DIR, and is meant to be
# thrown away with DIR.
set -eu

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: pg.sh start|stop|uri|standby|failover DIR ..." >&2; exit 2; }
[ -x "$PGBIN/initdb" ] || { echo "pg.sh: no $PGBIN/initdb (apt-get install postgresql-15)" >&2; exit 1; }

as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

case "$cmd" in
start)
	port=${3:-54329}
	mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown postgres "$dir"
	chmod 0700 "$dir"
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as_owner "$PGBIN/initdb" -D "$dir/data" -U stagedoor --auth=trust --locale=C.UTF-8 \
			-E UTF8 >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; exit 1; }
		cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
fsync = on
synchronous_commit = on
wal_level = replica
max_wal_senders = 4
shared_buffers = 64MB
log_min_messages = warning
EOF
		echo "host replication stagedoor 127.0.0.1/32 trust" >>"$dir/data/pg_hba.conf"
	fi
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
		{ cat "$dir/server.log" >&2; exit 1; }
	echo "$port" >"$dir/port"
	echo "postgresql://stagedoor@127.0.0.1:$port/postgres"
	;;
stop)
	[ -f "$dir/data/PG_VERSION" ] || exit 0
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
	;;
uri)
	echo "postgresql://stagedoor@127.0.0.1:$(cat "$dir/port")/postgres"
	;;
standby)
	sdir=${3:-}
	port=${4:-}
	[ -n "$sdir" ] && [ -n "$port" ] || { echo "usage: pg.sh standby PDIR DIR PORT" >&2; exit 2; }
	pport=$(cat "$dir/port")
	mkdir -p "$sdir"
	[ "$(id -u)" = 0 ] && chown postgres "$sdir"
	chmod 0700 "$sdir"
	# a try that failed (its port taken) leaves a copy no server runs on:
	# pg_basebackup wants an empty folder, so that copy goes
	if [ -e "$sdir/data" ]; then
		[ ! -e "$sdir/data/postmaster.pid" ] ||
			{ echo "pg.sh: a server runs on $sdir/data" >&2; exit 1; }
		rm -rf "$sdir/data"
	fi
	as_owner "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$pport" -U stagedoor -D "$sdir/data" \
		-R -X stream >"$sdir/basebackup.log" 2>&1 || { cat "$sdir/basebackup.log" >&2; exit 1; }
	# the standby's own port and socket; it waits for no one once promoted
	as_owner sh -c "cat >>'$sdir/data/postgresql.auto.conf'" <<CONF
port = $port
unix_socket_directories = '$sdir'
synchronous_standby_names = ''
primary_conninfo = 'host=127.0.0.1 port=$pport user=stagedoor application_name=standby1'
CONF
	as_owner "$PGBIN/pg_ctl" -D "$sdir/data" -l "$sdir/server.log" -w -t 60 start >/dev/null ||
		{ cat "$sdir/server.log" >&2; exit 1; }
	echo "$port" >"$sdir/port"
	psql="psql -X -q -t -A -h 127.0.0.1 -p $pport -U stagedoor postgres"
	$psql -c "ALTER SYSTEM SET synchronous_standby_names = 'standby1'" >/dev/null
	$psql -c "SELECT pg_reload_conf()" >/dev/null
	i=0
	until [ "$($psql -c "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby1' AND sync_state = 'sync'")" = 1 ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || {
			echo "pg.sh: the standby is not synchronous after 30 s" >&2
			as_owner "$PGBIN/pg_ctl" -D "$sdir/data" -m immediate -w -t 60 stop >/dev/null 2>&1
			exit 1
		}
		sleep 0.1
	done
	echo "postgresql://stagedoor@127.0.0.1:$pport,127.0.0.1:$port/postgres?target_session_attrs=read-write"
	;;
failover)
	sdir=${3:-}
	[ -n "$sdir" ] || { echo "usage: pg.sh failover PDIR DIR" >&2; exit 2; }
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
	as_owner "$PGBIN/pg_ctl" -D "$sdir/data" -w -t 60 promote >/dev/null ||
		{ cat "$sdir/server.log" >&2; exit 1; }
	;;
*)
	echo "usage: pg.sh start|stop|uri DIR [PORT]" >&2
	exit 2
	;;
esac
