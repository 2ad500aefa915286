#!/bin/sh
# run_tests.sh BUILD STAGEDOOR_BIN TEST...: run each cmocka test binary with
# STAGEDOOR_BIN set, then print one closing line "BUILD: N passed, N failed".
build=$1
bin=$2
shift 2
pass=0
fail=0
failed=""
export STAGEDOOR_BIN="$bin"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "$@"; do
	echo "== $build: $(basename "$t")"
	out=$(mktemp)
	"$t" >"$out" 2>&1
	rc=$?
	cat "$out"
	# cmocka prints "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s)..."
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	rm -f "$out"
	pass=$((pass + ${p:-0}))
	if [ "$rc" -ne 0 ]; then
		fail=$((fail + ${f:-1}))
		failed="$failed $(basename "$t")"
	fi
done
[ -n "$failed" ] && echo "$build: failing:$failed"
echo "$build: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
