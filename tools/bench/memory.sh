#!/bin/sh
# tools/bench/memory.sh BIN [MINUTES] [RATE]: the memory of `stagedoor run`
# under a steady load (make bench-memory).
#
# A fresh box in a temporary folder, `run` with 2 workers, the dashboard's
# HTTP server on 127.0.0.1 and the maildir transport; RATE orders a second
# (default 20) go in through `stagedoor order add` for MINUTES minutes
# (default 10) while the pipeline renders, sends and counts them.  Every 5 s
# it reads the PSS of run's whole process tree (run and every descendant,
# /proc/PID/smaps_rollup) and prints it; at the end, per minute, the median
# PSS, then the verdict: the largest sample at most 64 MiB, and the last
# minute's median within 10% of the second minute's (no growth).  The box
# must then drain and pass `stagedoor check`.  Exit 0 when all of that holds.
set -eu

BIN=${1:?usage: memory.sh BIN [MINUTES] [RATE]}
MINUTES=${2:-10}
RATE=${3:-20}
LIMIT_KB=$((64 * 1024))
dir=$(mktemp -d "${TMPDIR:-/tmp}/stagedoor-memory.XXXXXX")
db=$dir/box/stagedoor.db
run_pid=
load_pid=

cleanup() {
	[ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || :
	[ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null && wait "$run_pid" 2>/dev/null || :
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# tree_pss PID: the PSS (kB) of PID and all its descendants
tree_pss() {
	pids=$1 all=$1
	while [ -n "$pids" ]; do
		next=
		for p in $pids; do
			kids=$(cat /proc/"$p"/task/*/children 2>/dev/null || :)
			next="$next $kids"
		done
		pids=$(echo $next)
		all="$all $pids"
	done
	total=0
	for p in $all; do
		kb=$(awk '/^Pss:/ { print $2 }' /proc/"$p"/smaps_rollup 2>/dev/null || echo 0)
		total=$((total + ${kb:-0}))
	done
	echo "$total"
}

"$BIN" init --db "$db" >/dev/null
ev=$("$BIN" event add --name "Memory Night" --venue Hall --starts-at 2027-06-01T20:00Z \
	--capacity 1000000 --db "$db" | head -n 1)
"$BIN" run --db "$db" --workers 2 --mail-url "maildir:$dir/mail" \
	--http-listen 127.0.0.1:0 >"$dir/run.log" 2>&1 &
run_pid=$!
sleep 2
kill -0 "$run_pid" || { cat "$dir/run.log"; echo "memory: run did not start" >&2; exit 1; }
echo "memory: run pid $run_pid, idle PSS $(($(tree_pss "$run_pid") / 1024)) MiB;" \
	"$RATE orders/s for $MINUTES min"

# the load: RATE orders a second, each its own process, paced by the clock
(
	i=0
	start=$(date +%s)
	while :; do
		i=$((i + 1))
		"$BIN" order add --event "$ev" --name "Buyer $i" --email "buyer$i@example.com" \
			--seats 2 --idempotency-key "memory-$i" --db "$db" >/dev/null ||
			echo "memory: order $i failed" >&2
		due=$((start + i / RATE))
		now=$(date +%s)
		[ "$now" -lt "$due" ] && sleep $(awk "BEGIN { print 1 / $RATE }")
	done
) &
load_pid=$!

samples=$dir/samples
: >"$samples"
t=0
end=$((MINUTES * 60))
while [ "$t" -lt "$end" ]; do
	sleep 5
	t=$((t + 5))
	kb=$(tree_pss "$run_pid")
	echo "$t $kb" >>"$samples"
	echo "memory: ${t}s PSS $((kb / 1024)).$(((kb % 1024) * 10 / 1024)) MiB"
done
kill "$load_pid" 2>/dev/null || :
wait "$load_pid" 2>/dev/null || :
load_pid=

# the verdict, per minute
awk -v limit="$LIMIT_KB" -v minutes="$MINUTES" '
	{ m = int(($1 - 1) / 60) + 1; v[m, ++n[m]] = $2; if ($2 > max) max = $2 }
	function median(m,   i, j, t, k) {
		k = n[m]
		for (i = 1; i <= k; i++) a[i] = v[m, i]
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	END {
		for (m = 1; m <= minutes; m++) printf "memory: minute %d median PSS %.1f MiB\n", m, median(m) / 1024
		second = median(2); last = median(minutes)
		printf "memory: largest %.1f MiB (limit 64); last minute %.1f MiB vs second %.1f MiB: %+.1f%%\n",
			max / 1024, last / 1024, second / 1024, (last - second) * 100 / second
		ok = max <= limit && last <= second * 1.10
		print ok ? "memory: OK" : "memory: FAILED"
		exit !ok
	}' "$samples" || fail=1

i=0
until "$BIN" check --db "$db" >"$dir/check.out" 2>&1; do
	i=$((i + 1))
	[ "$i" -lt 120 ] || { cat "$dir/check.out"; echo "memory: the box did not drain" >&2; exit 1; }
	sleep 1
done
echo "memory: drained, check passes: $(cat "$dir/check.out")"
exit "${fail:-0}"
