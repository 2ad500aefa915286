#!/bin/sh
# engines.sh STAGEDOOR_BENCH: the queue and the pipeline on SQLite and on
# PostgreSQL side by side, and on PostgreSQL two boxes against one.
#
# A throwaway PostgreSQL 15 cluster (tools/pg.sh) on a free loopback port;
# every benchmark makes its own scratch schema there (bench --db) or its own
# SQLite file.  Each configuration runs REPS times (default 3), the two
# engines alternating round by round so that drift on a shared machine hits
# both alike; the medians and the ratios are printed.
#   queue      N noop jobs (BENCH_JOBS, default 20000), 2 workers, batch 50
#   boxes      the same on PostgreSQL: 1 box of 2 workers, then 2 boxes of 2
#              (two processes sharing the database and its SKIP LOCKED claim)
#   pipeline   BENCH_ORDERS orders (default 300) through intake, render, mail
# A benchmark, not a test: it reports, and fails only when a program fails.
set -u

if [ $# -ne 1 ]; then
	echo "usage: engines.sh STAGEDOOR_BENCH" >&2
	exit 2
fi
stagedoor_bench=$1
jobs=${BENCH_JOBS:-20000}
orders=${BENCH_ORDERS:-300}
reps=${BENCH_REPS:-3}

out=$(mktemp -d "${TMPDIR:-/tmp}/stagedoor-engines.XXXXXX") || exit 1
chmod 0755 "$out"
trap 'sh tools/pg.sh stop "$out/pg"; rm -rf "$out"' EXIT INT TERM
. "$(dirname "$0")/stats.sh"

uri=""
for try in 1 2 3 4 5; do
	uri=$(sh tools/pg.sh start "$out/pg" $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000)) \
		2>"$out/pg.err") && break
	uri=""
	rm -rf "$out/pg"
done
[ -n "$uri" ] || { echo "engines.sh: cannot start PostgreSQL:" >&2; cat "$out/pg.err" >&2; exit 1; }

# one NAME ARGS...: run stagedoor-bench ARGS --json once, append its line to NAME
one() {
	name=$1
	shift
	if ! "$stagedoor_bench" "$@" --json >"$out/line" 2>"$out/err"; then
		echo "engines.sh: bench $* failed:" >&2
		cat "$out/err" >&2
		exit 1
	fi
	cat "$out/line" >>"$out/$name"
}

# both NAME ARGS...: the SQLite run and the PostgreSQL one, in an order that
# alternates round by round
both() {
	both_name=$1
	shift
	if [ $((round % 2)) = 1 ]; then
		one "$both_name-sqlite" "$@"
		one "$both_name-pg" "$@" --db "$uri"
	else
		one "$both_name-pg" "$@" --db "$uri"
		one "$both_name-sqlite" "$@"
	fi
}

echo "engines: queue ($jobs noop jobs, 2 workers, batch 50) and pipeline ($orders orders), $reps rounds"
round=1
while [ $round -le "$reps" ]; do
	q="queue --jobs $jobs --workers 2 --batch 50 --latency-jobs 2000"
	p="pipeline --orders $orders"
	both q $q
	one q-pg2 $q --db "$uri" --boxes 2
	both p $p
	echo "  round $round done"
	round=$((round + 1))
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
row() { # LABEL KEY FILE-A FILE-B
	a=$(median "$out/$3" "$2")
	b=$(median "$out/$4" "$2")
	printf '  %-30s %12.1f %12.1f   x%s\n' "$1" "$a" "$b" "$(ratio "$b" "$a")"
}
printf '\n  %-30s %12s %12s   %s\n' "median of $reps" SQLite PostgreSQL "PostgreSQL/SQLite"
row "queue enqueue jobs/s" enqueue_jobs_per_s q-sqlite q-pg
row "queue claim+ack jobs/s" claim_ack_jobs_per_s q-sqlite q-pg
row "queue lifecycle jobs/s" lifecycle_jobs_per_s q-sqlite q-pg
row "queue latency p50 ms" latency_p50_ms q-sqlite q-pg
row "queue latency p99 ms" latency_p99_ms q-sqlite q-pg
row "pipeline end to end orders/s" orders_per_s p-sqlite p-pg
row "pipeline intake orders/s" intake_orders_per_s p-sqlite p-pg
printf '\n  %-30s %12s %12s   %s\n' "PostgreSQL, median of $reps" "1 box" "2 boxes" "2/1"
row "claim+ack jobs/s" claim_ack_jobs_per_s q-pg q-pg2
