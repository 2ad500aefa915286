#!/bin/sh
# npm_deps.sh DIR: the npm packages DIR's package-lock.json pins (the browser
# test's playwright-core), installed into DIR/node_modules once; again only
# when the lock file changed.
dir=$1
# Debian's nodejs comes without npm (NodeSource's has it): its own package then
command -v npm >/dev/null 2>&1 || sh "$(dirname "$0")/deps.sh" npm || exit 1
stamp="$dir/node_modules/.lock-installed"
[ -f "$stamp" ] && cmp -s "$dir/package-lock.json" "$stamp" && exit 0
echo "installing the npm packages of $dir (npm ci)"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || {
	echo "deps: npm ci failed in $dir" >&2
	exit 1
}
cp "$dir/package-lock.json" "$stamp"
