#!/bin/sh
# pg_tests.sh BUILD STAGEDOOR_BIN TEST...: the engine-dependent suites again,
# on PostgreSQL: a throwaway cluster (tools/pg.sh) in a temp folder on a free
# loopback port, STAGEDOOR_TEST_PG set to its URI (each test makes a schema
# of its own there), then tools/run_tests.sh; the cluster is stopped and
# removed afterwards, whatever the tests did.
build=$1
bin=$2
shift 2
dir=$(mktemp -d /tmp/stagedoor-pg-XXXXXX) || exit 1
chmod 0755 "$dir"
trap 'sh tools/pg.sh stop "$dir/pg"; rm -rf "$dir"' EXIT INT TERM
uri=""
for try in 1 2 3 4 5; do
	port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
	if uri=$(sh tools/pg.sh start "$dir/pg" "$port" 2>"$dir/start.err"); then
		break
	fi
	uri=""
	rm -rf "$dir/pg"
done
if [ -z "$uri" ]; then
	echo "pg_tests: cannot start a PostgreSQL cluster:" >&2
	cat "$dir/start.err" >&2
	mkdir -p build/test-output
	echo "$build: 0 passed, 1 failed, 0 skipped" >build/test-output/$build.result
	exit 1
fi
export STAGEDOOR_TEST_PG="$uri"
sh tools/run_tests.sh "$build" "$bin" "$@"
