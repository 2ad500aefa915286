#!/bin/sh
# deps.sh PACKAGE...: install the Debian packages that are missing.
# As root it runs apt-get; otherwise it prints the command to run and fails.
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "deps: apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	# apt's own words only when it fails
	log=$(mktemp)
	if ! { apt-get update -qq && apt-get install -y -qq $missing; } >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		echo "deps: apt-get install failed for:$missing" >&2
		exit 1
	fi
	rm -f "$log"
else
	echo "deps: missing Debian packages:$missing" >&2
	echo "deps: run: sudo apt-get install -y$missing" >&2
	exit 1
fi
