#!/bin/sh
# upgrade_fixture.sh OLD_BIN OUT.sql: the database of a box made by an older
# stagedoor (built from a release tag: git archive v0.1.0 | tar -x -C DIR;
# make -C DIR bin/stagedoor), as SQL, for tests/test_upgrade.c: an event, 12
# orders taken, their outbox rows published to the stream by one relay pass,
# no job run yet, so the new version must render, send and count every one
# exactly once after it migrates the file.  The SQL holds no key (ticket.key
# stays out: codes are made when the tickets are rendered) and its buyers
# are example.org addresses.
set -eu
old=$1
out=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export STAGEDOOR_DB="$dir/stagedoor.db"
"$old" init >/dev/null
event=$("$old" event add --name "Upgrade Night" --venue "Hall" \
	--starts-at 2030-06-01T20:00Z --capacity 100)
i=1
while [ "$i" -le 12 ]; do
	"$old" order add --event "$event" --name "Buyer $i" --email "buyer$i@example.org" \
		--seats $((i % 3 + 1)) --idempotency-key "upgrade-$i" >/dev/null
	i=$((i + 1))
done
"$old" relay --drain >/dev/null 2>&1
version=$(sqlite3 "$STAGEDOOR_DB" "PRAGMA user_version")
{
	echo "-- A box made by $("$old" --version | head -1), schema version $version:"
	echo "-- made by tools/upgrade_fixture.sh; loaded by tests/test_upgrade.c."
	echo "PRAGMA user_version = $version;"
	sqlite3 "$STAGEDOOR_DB" .dump
} > "$out"
echo "$out: schema $version, $(grep -c 'INSERT INTO orders' "$out") orders"
