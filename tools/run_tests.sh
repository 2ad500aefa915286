#!/bin/sh
# run_tests.sh BUILD STAGEDOOR_BIN TEST...: run each cmocka test binary with
# STAGEDOOR_BIN set; one line per binary (its test counts and time), and a
# failing binary's whole log on its own lines after it.  Every log is kept in
# build/test-output/BUILD/TEST.log.  Then one line per skipped test with the
# reason it gave (TU_SKIP's "# skipped: why" line), and the closing line
# "BUILD: N passed, N failed, N skipped", also written to
# build/test-output/BUILD.result.  Two binaries run at a time (TEST_JOBS), each
# named in TEST_ALONE by itself.
#
# run_tests.sh --report BUILD...: each BUILD's closing line (a build that did
# not get as far as its tests counts as one failure), then their sum as
# "test: N passed, N failed, N skipped"; exit 1 when anything failed.
out_dir=build/test-output

if [ "$1" = --report ]; then
	shift
	pass=0
	fail=0
	skipped=0
	echo
	for b in "$@"; do
		line=$(cat "$out_dir/$b.result" 2>/dev/null)
		case $line in
		"$b: "*" passed, "*" failed, "*" skipped") ;;
		*)
			echo "$b: the build failed before its tests ran"
			line="$b: 0 passed, 1 failed, 0 skipped"
			;;
		esac
		echo "$line"
		set -- $line
		pass=$((pass + $2))
		fail=$((fail + $4))
		skipped=$((skipped + $6))
	done
	echo "test: $pass passed, $fail failed, $skipped skipped"
	[ "$fail" -eq 0 ]
	exit
fi

build=$1
bin=$2
shift 2
pass=0
fail=0
skipped=0
failed=""
reasons=""
logs=$out_dir/$build
mkdir -p "$logs"
rm -f "$out_dir/$build.result"
export STAGEDOOR_BIN="$bin"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
jobs=${TEST_JOBS:-2}
running=""

# start NAME PATH: run one binary in the background; its log, exit status
# and start time in $logs
start() {
	rm -f "$logs/$1.rc"
	date +%s >"$logs/$1.t0"
	( "$2" >"$logs/$1.log" 2>&1; echo $? >"$logs/$1.rc.tmp"; mv "$logs/$1.rc.tmp" "$logs/$1.rc" ) &
	running="$running $1"
}

# report NAME: the finished binary's line (and its log when it failed)
report() {
	rname=$1
	log=$logs/$rname.log
	rc=$(cat "$logs/$rname.rc")
	secs=$(($(date +%s) - $(cat "$logs/$rname.t0")))
	rm -f "$logs/$rname.rc" "$logs/$rname.t0"
	# cmocka prints "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s)..."
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	k=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	pass=$((pass + ${p:-0}))
	skipped=$((skipped + ${k:-0}))
	# each skipped test once, with the reason printed just before it
	why=$(awk -v b="$build" -v t="$rname" '
		/^# skipped: / { why = substr($0, 12); next }
		/^\[  SKIPPED \] [A-Za-z_]/ && !($4 in seen) {
			seen[$4] = 1
			printf "  skip  %s %s %s: %s\n", b, t, $4, (why == "" ? "(no reason given)" : why)
			why = ""
		}' "$log")
	[ -n "$why" ] && reasons="$reasons$why
"
	if [ "$rc" -eq 0 ]; then
		printf '  ok    %s %-18s %3s passed %s %4s s\n' "$build" "$rname" "${p:-0}" \
			"$([ "${k:-0}" -gt 0 ] && printf '%3s skipped' "$k" || printf '%11s' '')" "$secs"
	else
		fail=$((fail + ${f:-1}))
		failed="$failed $rname"
		printf '  FAIL  %s %-18s %3s passed, %s failed, exit %s  %4s s\n' \
			"$build" "$rname" "${p:-0}" "${f:-?}" "$rc" "$secs"
		printf -- '---- %s %s: its log (%s) ----\n' "$build" "$rname" "$log"
		cat "$log"
		printf -- '---- end of %s %s ----\n' "$build" "$rname"
	fi
}

# reap: report finished binaries until fewer than $limit run
reap() {
	while :; do
		still=""
		for r in $running; do
			if [ -f "$logs/$r.rc" ]; then report "$r"; else still="$still $r"; fi
		done
		running=$still
		set -- $running
		[ "$#" -lt "$limit" ] && return
		sleep 0.2
	done
}

# TEST_JOBS binaries at a time (two: the machine's two cores), but one that
# measures time or loads the whole machine (named in TEST_ALONE) runs with
# nothing beside it
for t in "$@"; do
	tname=$(basename "$t")
	case " ${TEST_ALONE:-} " in
	*" $tname "*) alone=1 ;;
	*) alone=0 ;;
	esac
	limit=$jobs
	[ "$alone" = 1 ] && limit=1
	reap
	start "$tname" "$t"
	[ "$alone" = 1 ] && reap
done
limit=1
reap
wait
[ -n "$reasons" ] && printf '%s' "$reasons"
[ -n "$failed" ] && echo "$build: failing:$failed"
echo "$build: $pass passed, $fail failed, $skipped skipped" | tee "$out_dir/$build.result"
[ "$fail" -eq 0 ]
