#!/bin/sh
# run_fake.sh [SCREENSHOT]: the browser test against fake_box.mjs (no box
# needed): dashboard.mjs with the operator's token (SCREENSHOT, and
# SCREENSHOT with -phone), then roles.mjs with each other role's token
# (SCREENSHOT with -box_office, -door, -monitor), then venue.mjs with the
# operator's token (SCREENSHOT with -venue, and -venue-phone): it sells, sets
# events up and closes one, so it runs last.  Installs playwright-core from
# the lock file when missing.
set -eu
cd "$(dirname "$0")"
shot=${1:-/tmp/stagedoor-dashboard.png}
sh ../../tools/npm_deps.sh . || exit 1
out=$(mktemp)
node fake_box.mjs --port 0 --token fake-token >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out"' EXIT
i=0
while ! grep -q listening "$out"; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "run_fake: fake_box did not start" >&2; exit 1; }
	sleep 0.1
done
url=$(sed -n 's/^listening //p' "$out")
node dashboard.mjs "$url" fake-token "$shot"
for role in box_office door monitor; do
	node roles.mjs "$url" "fake-token-$role" $role "${shot%.png}-$role.png"
	echo "roles: ok ($role)"
done
node venue.mjs "$url" fake-token "${shot%.png}-venue.png"
