#!/bin/sh
# peers.sh STAGEDOOR_BENCH SQLBENCH PEER_REDIS PEER_BEANSTALK: the queue next to
# Redis Streams, beanstalkd and the minimal program, in one run.
#
# The same lifecycle for each program (N noop jobs enqueued, then claimed up
# to 100 at a time and acknowledged by one consumer), in two scenarios:
#   bulk     100 jobs per enqueue transaction (box, minimal) or pipeline
#            (Redis, beanstalkd)
#   singles  one job per enqueue transaction or call, as independent
#            requests make them; claims still take up to 100
# Programs:
#   box         STAGEDOOR_BENCH queue --workers 1 --batch 100 --enqueue-batch E
#               --sync normal --latency-jobs 0 --json
#   minimal     SQLBENCH --batch 100 --enqueue-batch E --sync normal --json
#   redis       PEER_REDIS against redis-server (appendonly yes, appendfsync
#               everysec, save "", its own dir), started for the run
#   beanstalkd  PEER_BEANSTALK against beanstalkd -b DIR (binlog, fsync at
#               most every 50 ms: its default), started for the run
# Each server is started on a free loopback port in a temporary directory of
# its own for each run of its peer, and stopped after it; a server that the
# system may run is never used.
#
# For each scenario, REPS rounds (default 3); in each round every program
# runs once, the order rotated by one each round so that drift on a shared
# machine hits all alike.  Prints the medians (enqueue, claim+ack, lifecycle
# jobs/s) and the targets, each met or missed:
#   box lifecycle >= 1.2 x the best peer's, in each scenario
#   box lifecycle >= 90% of the minimal program's, in each scenario
# A benchmark, not a test: a missed target is reported and the exit status
# stays 0; a program that fails is an error (exit 1).
#
# Environment: BENCH_JOBS (default 100000), BENCH_REPS (default 3).
set -u

if [ $# -ne 4 ]; then
	echo "usage: peers.sh STAGEDOOR_BENCH SQLBENCH PEER_REDIS PEER_BEANSTALK" >&2
	exit 2
fi
stagedoor_bench=$1
sqlbench=$2
peer_redis=$3
peer_beanstalk=$4
jobs=${BENCH_JOBS:-100000}
reps=${BENCH_REPS:-3}
programs="box minimal redis beanstalkd"
scenarios="bulk:100 singles:1"

for b in redis-server beanstalkd; do
	if ! command -v "$b" >/dev/null; then
		echo "peers.sh: $b not found (make deps-peers installs it)" >&2
		exit 1
	fi
done

out=$(mktemp -d "${TMPDIR:-/tmp}/stagedoor-peers.XXXXXX") || exit 1
server_pid=""
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "peers.sh: $*" >&2
	exit 1
}

# listening PORT: whether a socket listens on 127.0.0.1:PORT
listening() {
	hex=$(printf '0100007F:%04X' "$1")
	grep -q "^ *[0-9]*: $hex 00000000:0000 0A " /proc/net/tcp
}

# server NAME: start NAME's server for one run in a fresh "$out/srv";
# sets port and server_pid.  A server that loses its port to another
# process dies at once: then another port.
server() {
	for attempt in 1 2 3 4 5; do
		rm -rf "$out/srv" && mkdir -p "$out/srv/binlog" || exit 1
		port=$("$peer_beanstalk" --free-port) || exit 1
		if [ "$1" = redis ]; then
			cat >"$out/srv/redis.conf" <<-EOF
			bind 127.0.0.1
			port $port
			dir $out/srv
			daemonize no
			appendonly yes
			appendfsync everysec
			save ""
			logfile $out/srv/server.log
			EOF
			redis-server "$out/srv/redis.conf" >/dev/null 2>&1 &
		else
			beanstalkd -l 127.0.0.1 -p "$port" -b "$out/srv/binlog" \
				>"$out/srv/server.log" 2>&1 &
		fi
		server_pid=$!
		i=0
		while [ $i -lt 100 ]; do
			kill -0 "$server_pid" 2>/dev/null || break
			listening "$port" && return 0
			sleep 0.05
			i=$((i + 1))
		done
		kill "$server_pid" 2>/dev/null
		wait "$server_pid" 2>/dev/null
		server_pid=""
	done
	cat "$out/srv/server.log" >&2
	fail "$1 did not start"
}

server_stop() {
	kill "$server_pid" 2>/dev/null
	wait "$server_pid" 2>/dev/null
	server_pid=""
	rm -rf "$out/srv"
}

# field, median
. "$(dirname "$0")/stats.sh"

# one PROGRAM SCENARIO E: run PROGRAM once, append its JSON line
one() {
	opts="--jobs $jobs --batch 100 --enqueue-batch $3 --json"
	case $1 in
	box)
		"$stagedoor_bench" queue $opts --workers 1 --sync normal --latency-jobs 0 \
			>"$out/line" 2>"$out/err" ;;
	minimal)
		"$sqlbench" $opts --sync normal >"$out/line" 2>"$out/err" ;;
	redis)
		server redis
		"$peer_redis" $opts --port "$port" --pid "$server_pid" >"$out/line" 2>"$out/err" ;;
	beanstalkd)
		server beanstalkd
		"$peer_beanstalk" $opts --port "$port" --pid "$server_pid" \
			>"$out/line" 2>"$out/err" ;;
	esac
	rc=$?
	[ -n "$server_pid" ] && server_stop
	if [ $rc -ne 0 ] || ! grep -q lifecycle_jobs_per_s "$out/line"; then
		cat "$out/err" "$out/line" >&2
		fail "$1 ($2) failed with status $rc"
	fi
	cat "$out/line" >>"$out/$1-$2"
	printf '  %-7s round %d  %-10s lifecycle %8.0f jobs/s\n' "$2" "$round" "$1" \
		"$(field "$out/line" lifecycle_jobs_per_s)"
}

# rotate K WORDS...: the words, starting at the K-th (0-based)
rotate() {
	k=$1
	shift
	n=$#
	i=0
	while [ $i -lt $n ]; do
		eval "printf '%s ' \"\${$(((i + k) % n + 1))}\""
		i=$((i + 1))
	done
}

echo "== make bench-peers: $jobs noop jobs, 1 consumer, claims of up to 100, $reps rounds," \
	"order rotated"
echo "   $(redis-server --version | cut -d' ' -f1-3); beanstalkd $(beanstalkd -v | cut -d' ' -f2)"
start=$(date +%s)
for sc in $scenarios; do
	name=${sc%%:*}
	round=1
	while [ "$round" -le "$reps" ]; do
		for p in $(rotate $((round - 1)) $programs); do
			one "$p" "$name" "${sc#*:}"
		done
		round=$((round + 1))
	done
done
elapsed=$(($(date +%s) - start))

echo
echo "== medians of $reps runs, jobs/s"
printf '%-11s %-8s %11s %11s %11s\n' program scenario enqueue claim+ack lifecycle
for sc in $scenarios; do
	name=${sc%%:*}
	for p in $programs; do
		printf '%-11s %-8s %11.0f %11.0f %11.0f\n' "$p" "$name" \
			"$(median "$out/$p-$name" enqueue_jobs_per_s)" \
			"$(median "$out/$p-$name" claim_ack_jobs_per_s)" \
			"$(median "$out/$p-$name" lifecycle_jobs_per_s)"
	done
done

echo
echo "== targets (lifecycle medians)"
missed=0
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { print a / b }'
}
# target LABEL RATIO GOAL
target() {
	if awk -v r="$2" -v g="$3" 'BEGIN { exit !(r >= g) }'; then
		printf '  MET     %s: %.2f (>= %s)\n' "$1" "$2" "$3"
	else
		printf '  MISSED  %s: %.2f (>= %s)\n' "$1" "$2" "$3"
		missed=$((missed + 1))
	fi
}
for sc in $scenarios; do
	name=${sc%%:*}
	box=$(median "$out/box-$name" lifecycle_jobs_per_s)
	min=$(median "$out/minimal-$name" lifecycle_jobs_per_s)
	r=$(median "$out/redis-$name" lifecycle_jobs_per_s)
	b=$(median "$out/beanstalkd-$name" lifecycle_jobs_per_s)
	best=redis
	awk -v r="$r" -v b="$b" 'BEGIN { exit !(b > r) }' && best=beanstalkd
	peer=$(median "$out/$best-$name" lifecycle_jobs_per_s)
	target "$name: box / best peer ($best)" "$(ratio "$box" "$peer")" 1.2
	target "$name: box / minimal" "$(ratio "$box" "$min")" 0.9
done
if [ "$missed" -gt 0 ]; then
	echo "== $missed target(s) MISSED (a benchmark, not a test: exit status 0); took ${elapsed}s"
else
	echo "== every target met; took ${elapsed}s"
fi
exit 0
