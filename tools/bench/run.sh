#!/bin/sh
# run.sh STAGEDOOR_BENCH SQLBENCH: the queue benchmark next to the minimal program.
#
# For N=100000 noop jobs, 1 worker, synchronous=NORMAL, two configurations:
#   batched    batch 100  (100 enqueues per transaction, claims of 100)
#   unbatched  batch 1
# each run REPS times (default 3) on both programs, the two programs
# alternating (queue first on odd rounds, minimal first on even ones) so that
# drift on a shared machine hits both alike.  Prints the median lifecycle
# jobs/s of each program, the ratio queue/minimal, the queue's other figures
# (medians) and whether each target is met:
#   batched   lifecycle >= 85% of the minimal program's, and > 150,000 jobs/s
#   unbatched lifecycle >= 85% of the minimal program's
# A benchmark, not a test: a missed target is reported and the exit status
# stays 0; a program that fails is an error (exit 1).
#
# Environment: BENCH_JOBS (default 100000), BENCH_REPS (default 3).
set -u

if [ $# -ne 2 ]; then
	echo "usage: run.sh STAGEDOOR_BENCH SQLBENCH" >&2
	exit 2
fi
stagedoor_bench=$1
sqlbench=$2
jobs=${BENCH_JOBS:-100000}
reps=${BENCH_REPS:-3}

out=$(mktemp -d "${TMPDIR:-/tmp}/stagedoor-runsh.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT INT TERM

# field, median
. "$(dirname "$0")/stats.sh"

# range FILE KEY: "min-max" of KEY, to show how noisy the runs were
range() {
	field "$1" "$2" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f-%.0f", lo, hi }'
}

# one PROGRAM CONFIG BATCH: run one program once, append its JSON line
one() {
	prog=$1
	cfg=$2
	b=$3
	if [ "$prog" = queue ]; then
		"$stagedoor_bench" queue --jobs "$jobs" --workers 1 --batch "$b" --sync normal \
			--json >"$out/line" 2>"$out/err"
	else
		"$sqlbench" --jobs "$jobs" --batch "$b" --sync normal --json \
			>"$out/line" 2>"$out/err"
	fi
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q lifecycle_jobs_per_s "$out/line"; then
		echo "run.sh: $prog ($cfg, batch $b) failed with status $rc:" >&2
		cat "$out/err" "$out/line" >&2
		exit 1
	fi
	cat "$out/line" >>"$out/$prog-$cfg"
	printf '  %-9s %-7s round %d: lifecycle %8.0f jobs/s\n' "$cfg" "$prog" "$round" \
		"$(field "$out/line" lifecycle_jobs_per_s)"
}

echo "== make bench: $jobs noop jobs, 1 worker, synchronous=NORMAL, $reps rounds," \
	"programs alternated"
echo "   queue:   $stagedoor_bench queue --jobs $jobs --workers 1 --batch B --sync normal --json"
echo "   minimal: $sqlbench --jobs $jobs --batch B --sync normal --json"
start=$(date +%s)
round=1
while [ "$round" -le "$reps" ]; do
	for cfg in batched:100 unbatched:1; do
		name=${cfg%%:*}
		b=${cfg#*:}
		if [ $((round % 2)) -eq 1 ]; then
			one queue "$name" "$b"
			one minimal "$name" "$b"
		else
			one minimal "$name" "$b"
			one queue "$name" "$b"
		fi
	done
	round=$((round + 1))
done
elapsed=$(($(date +%s) - start))

echo
echo "== medians of $reps runs (jobs/s)      queue     minimal   queue/minimal"
for cfg in batched:100 unbatched:1; do
	name=${cfg%%:*}
	b=${cfg#*:}
	q=$(median "$out/queue-$name" lifecycle_jobs_per_s)
	m=$(median "$out/minimal-$name" lifecycle_jobs_per_s)
	awk -v n="$name" -v b="$b" -v q="$q" -v m="$m" -v qr="$(range "$out/queue-$name" lifecycle_jobs_per_s)" \
		-v mr="$(range "$out/minimal-$name" lifecycle_jobs_per_s)" 'BEGIN {
		printf "%-9s (batch %3s) lifecycle   %9.0f   %9.0f   %6.1f%%   (ranges: queue %s, minimal %s)\n",
			n, b, q, m, 100 * q / m, qr, mr }'
	for k in enqueue claim_ack; do
		q=$(median "$out/queue-$name" ${k}_jobs_per_s)
		m=$(median "$out/minimal-$name" ${k}_jobs_per_s)
		awk -v k="$k" -v q="$q" -v m="$m" 'BEGIN { sub("_", "+", k);
			printf "                      %-11s %9.0f   %9.0f   %6.1f%%\n", k, q, m, 100 * q / m }'
	done
	p50=$(median "$out/queue-$name" latency_p50_ms)
	p99=$(median "$out/queue-$name" latency_p99_ms)
	off=$(median "$out/queue-$name" latency_offered_jobs_per_s)
	rss=$(median "$out/queue-$name" peak_rss_kb)
	awk -v p50="$p50" -v p99="$p99" -v off="$off" -v rss="$rss" 'BEGIN {
		printf "                      queue latency p50 %.3f ms, p99 %.3f ms (offered %.0f jobs/s); peak RSS %.1f MiB\n",
			p50, p99, off, rss / 1024 }'
done

echo
echo "== targets"
missed=0
# target LABEL OK(0/1) DETAIL
target() {
	if [ "$2" -eq 1 ]; then
		echo "  MET     $1 ($3)"
	else
		echo "  MISSED  $1 ($3)"
		missed=$((missed + 1))
	fi
}
for name in batched unbatched; do
	q=$(median "$out/queue-$name" lifecycle_jobs_per_s)
	m=$(median "$out/minimal-$name" lifecycle_jobs_per_s)
	ok=$(awk -v q="$q" -v m="$m" 'BEGIN { print (q >= 0.85 * m) ? 1 : 0 }')
	pct=$(awk -v q="$q" -v m="$m" 'BEGIN { printf "%.1f%%", 100 * q / m }')
	target "$name lifecycle >= 85% of the minimal program's" "$ok" "$pct"
	if [ "$name" = batched ]; then
		ok=$(awk -v q="$q" 'BEGIN { print (q > 150000) ? 1 : 0 }')
		target "batched lifecycle > 150,000 jobs/s" "$ok" "$(printf '%.0f jobs/s' "$q")"
	fi
done
if [ "$missed" -gt 0 ]; then
	echo "== $missed target(s) MISSED (a benchmark, not a test: exit status 0); took ${elapsed}s"
else
	echo "== every target met; took ${elapsed}s"
fi
exit 0
