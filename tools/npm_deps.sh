#!/bin/sh
# npm_deps.sh DIR: the npm packages DIR's package-lock.json pins (the browser
# test's playwright-core), installed into DIR/node_modules; again when the
# lock file or the node that runs them changed.
#
# The pins are chosen to run on Debian 12's own nodejs (18); npm is told to
# refuse (--engine-strict) a package whose "engines" the node on this
# machine does not satisfy, so a pin that this system cannot run fails
# here, loudly, and not later inside a test.
dir=$1
command -v node >/dev/null 2>&1 || sh "$(dirname "$0")/deps.sh" nodejs || exit 1
# Debian's nodejs comes without npm (NodeSource's has it): its own package then
command -v npm >/dev/null 2>&1 || sh "$(dirname "$0")/deps.sh" npm || exit 1
stamp="$dir/node_modules/.lock-installed"
want=$(printf 'node %s\n' "$(node --version)"; cat "$dir/package-lock.json")
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
echo "deps: npm ci in $dir (node $(node --version))"
(cd "$dir" && npm ci --engine-strict --no-audit --no-fund --loglevel=error) || {
	echo "deps: npm ci failed in $dir: a package it pins does not run on node" \
		"$(node --version), or the registry is out of reach (npm's words above)" >&2
	exit 1
}
printf '%s\n' "$want" >"$stamp"
