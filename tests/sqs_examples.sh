#!/bin/sh
# sqs_examples.sh LANG MODE CRASH DIR: one run of the manual's example
# worker (dist/doc/examples/sqs_worker.py or .mjs, LANG py or js) under a
# reclaim, for tests/test_sqs.c.  In DIR (the worker's own files): the
# queue, an order and its message; a first worker (MODE: safe, or naive
# with --naive) that crashes after CRASH (charge or commit) with the
# message received for 1 s; then, once that visibility is over and the
# claim is stale, a second worker that handles the same delivery again.
# Prints the example's report last: "charges N sales TOTAL".
# AWS_ENDPOINT_URL and the credentials come from the environment.
set -e
lang=$1 mode=$2 crash=$3 dir=$4
root=$(pwd)
case $lang in
py) run() { /usr/bin/python3 "$root/dist/doc/examples/sqs_worker.py" "$@"; } ;;
js)
	cp "$root/dist/doc/examples/sqs_worker.mjs" "$dir/"
	ln -sfn "$root/tests/browser/node_modules" "$dir/node_modules"
	run() { node "$dir/sqs_worker.mjs" "$@"; } ;;
*) echo "sqs_examples: LANG is py or js" >&2; exit 2 ;;
esac
naive=""
[ "$mode" = naive ] && naive=--naive
cd "$dir"
export STALE_CLAIM_S=1
run setup A-1001 2500
rc=0
run work $naive --crash-after "$crash" --visibility 1 || rc=$?
[ "$rc" = 3 ] || { echo "sqs_examples: the first worker did not crash (exit $rc)" >&2; exit 1; }
sleep 1.5
run work $naive
run report
