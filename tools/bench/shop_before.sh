#!/bin/sh
# shop_before.sh BEFORE_BENCH THIS_BENCH [SHOP OPTIONS...]: `stagedoor-bench
# shop` of an older release next to this tree's, in one run.
#
# BEFORE_BENCH is an older release's build/stagedoor-bench (its shop runs in
# that program, its relay and worker are the bin/stagedoor beside it);
# THIS_BENCH this tree's.  Each round (BENCH_REPS, default 3) runs four
# configurations once, with the same SHOP OPTIONS, the order rotated round
# by round so that drift on a shared machine hits all alike:
#   before       the older bench with its own paysink (as that release ships)
#   before-ps    the older bench with this tree's paysink: the same provider
#                as this tree's runs, so the ratio is the box's alone
#   this-100     this tree's with --unpaid-share 100: like for like (no
#                share to count against)
#   this         this tree's at the box's default share (25 %; the bench
#                makes its event large enough that no buyer waits in line)
# and prints the medians of the checkout and hold-to-order figures with the
# ratios this/before-ps, and each configuration's range.  A benchmark, not a
# test: it fails only when a program fails.
set -u

if [ $# -lt 2 ]; then
	echo "usage: shop_before.sh BEFORE_BENCH THIS_BENCH [SHOP OPTIONS...]" >&2
	exit 2
fi
before=$1
this=$2
shift 2
reps=${BENCH_REPS:-3}
paysink=$(dirname "$this")/paysink

out=$(mktemp -d "${TMPDIR:-/tmp}/stagedoor-shopbefore.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT INT TERM

# first FILE KEY: the first value of KEY on each line of FILE (bench shop's
# line names each figure again in its "ranges")
first() {
	awk -v k="\"$2\":" '{ i = index($0, k); if (i) { v = substr($0, i + length(k));
		sub(/[^-0-9.eE+].*/, "", v); print v } }' "$1"
}

# median FILE KEY, range FILE KEY ("lo-hi" of the rounds)
median() {
	first "$1" "$2" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() {
	first "$1" "$2" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f-%.1f", lo, hi }'
}

# one NAME BENCH [OPTIONS...]: one round of bench shop, its line into NAME
one() {
	name=$1
	bench=$2
	shift 2
	if ! "$bench" shop --rounds 1 "$@" --json >"$out/line" 2>"$out/err"; then
		echo "shop_before.sh: $bench shop $* failed:" >&2
		cat "$out/err" >&2
		exit 1
	fi
	cat "$out/line" >>"$out/$name"
}

# config K [OPTIONS...]: configuration K (0..3) of the round
config() {
	c=$1
	shift
	case $c in
	0) one before "$before" "$@" ;;
	1) one before-ps "$before" --paysink "$paysink" "$@" ;;
	2) one this-100 "$this" --unpaid-share 100 "$@" ;;
	3) one this "$this" "$@" ;;
	esac
}

echo "shop_before: $before and $this, shop --rounds 1 $*, $reps rounds"
round=0
while [ $round -lt "$reps" ]; do
	k=0
	while [ $k -lt 4 ]; do
		config $(((k + round) % 4)) "$@"
		k=$((k + 1))
	done
	round=$((round + 1))
	echo "  round $round done"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
row() { # LABEL KEY
	b=$(median "$out/before" "$2")
	p=$(median "$out/before-ps" "$2")
	h=$(median "$out/this-100" "$2")
	d=$(median "$out/this" "$2")
	printf '  %-28s %9.2f %10.2f %9.2f %9.2f   x%-5s x%-5s  %s | %s | %s | %s\n' "$1" "$b" \
		"$p" "$h" "$d" "$(ratio "$h" "$p")" "$(ratio "$d" "$p")" "$(range "$out/before" "$2")" \
		"$(range "$out/before-ps" "$2")" "$(range "$out/this-100" "$2")" \
		"$(range "$out/this" "$2")"
}
printf '\n  %-28s %9s %10s %9s %9s   %-6s %-6s  %s\n' "median of $reps" before before-ps \
	this-100 this "100/ps" "this/ps" "ranges: before | before-ps | this-100 | this"
row "checkouts/s" checkouts_per_s
row "checkout p50 ms" checkout_p50_ms
row "checkout p99 ms" checkout_p99_ms
row "POST checkout p50 ms" checkout_post_p50_ms
row "shop CPU ms/checkout" cpu_shop_ms_per_checkout
row "paysink CPU ms/checkout" cpu_paysink_ms_per_checkout
row "hold tx alone p50 ms" alone_hold_tx_p50_ms
row "webhook: order seen p50 ms" webhook_order_p50_ms
row "webhook: order seen p99 ms" webhook_order_p99_ms
row "pay to created_at p50 ms" webhook_created_p50_ms
row "return: order p50 ms" return_order_p50_ms
row "reconcile past 5 s p50 ms" reconcile_beyond_delay_p50_ms
echo "  before: $before; before-ps: the same with $paysink;"
echo "  this-100: $this --unpaid-share 100; this: at the box's default share (25 %)"
