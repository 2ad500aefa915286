#!/bin/sh
# run_door_fake.sh [SCREENSHOT]: the door page's browser test (door.mjs)
# against fake_door.mjs, end to end, no box needed: a real ticket from
# bin/stagedoor (built by `make bin/stagedoor`; STAGEDOOR_BIN names another)
# on a throwaway database, turned into a fake camera by make_camera.sh.
# Installs playwright-core from the lock file when missing.  Screenshots:
# SCREENSHOT (default /tmp/stagedoor-door.png) and SCREENSHOT-idle.png.
set -eu
cd "$(dirname "$0")"
shot=${1:-/tmp/stagedoor-door.png}
bin=${STAGEDOOR_BIN:-$(cd ../.. && pwd)/bin/stagedoor}
[ -x "$bin" ] || { echo "run_door_fake: no $bin: run make bin/stagedoor first" >&2; exit 1; }
sh ../../tools/npm_deps.sh . || exit 1
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

# one order of one seat, rendered: its PDF holds the ticket's QR code
db=$tmp/box/stagedoor.db
mkdir -p "$tmp/box"
"$bin" init --db "$db" >/dev/null
event=$("$bin" event add --db "$db" --name "Midnight Quartet" --venue Hall \
	--starts-at 2036-12-31T20:00:00Z --capacity 100)
order=$("$bin" order add --db "$db" --event "$event" --name "Ada Lovelace" \
	--email ada@example.com --seats 1)
"$bin" relay --drain --db "$db" >/dev/null 2>&1
"$bin" worker --drain --db "$db" >/dev/null 2>&1
"$bin" order pdf "$order" --out "$tmp/ticket.pdf" --db "$db" >/dev/null
sh make_camera.sh "$tmp/ticket.pdf" "$tmp/camera.y4m" >/dev/null

node fake_door.mjs --port 0 --token fake-door-token >"$tmp/fake.out" &
pid=$!
i=0
while ! grep -q listening "$tmp/fake.out"; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "run_door_fake: fake_door did not start" >&2; exit 1; }
	sleep 0.1
done
url=$(sed -n 's/^listening //p' "$tmp/fake.out")
node door.mjs "$url" fake-door-token "$tmp/camera.y4m" "$shot"
