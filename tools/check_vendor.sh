#!/bin/sh
# check_vendor.sh: proves that src/door/vendor/jsQR.js (the door page's QR
# decoder, embedded in the binary) is byte for byte the dist/jsQR.js of the
# jsqr package that src/door/package-lock.json pins, and its licence file
# the package's LICENSE.  npm ci in a temp folder fetches the pinned tarball
# and refuses it unless it matches the lock's integrity hash; cmp then
# compares.  The build never runs npm: only this check does.
#
# usage: sh tools/check_vendor.sh
# exit 0: the vendored files are the pinned ones; 1: they are not, or the
# check could not run (the message says which).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
door=$root/src/door
command -v npm >/dev/null 2>&1 || sh "$root/tools/deps.sh" npm || {
	echo "check_vendor: FAIL: npm is needed to fetch the pinned jsqr" >&2
	exit 1
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$door/package.json" "$door/package-lock.json" "$tmp/" || exit 1
if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null); then
	echo "check_vendor: FAIL: npm ci of src/door/package-lock.json failed" \
		"(the registry is out of reach, or the tarball does not match the lock's hash)" >&2
	exit 1
fi
pkg=$tmp/node_modules/jsqr
version=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg/package.json" | head -n 1)
rc=0
if ! cmp "$pkg/dist/jsQR.js" "$door/vendor/jsQR.js"; then
	echo "check_vendor: FAIL: src/door/vendor/jsQR.js is not jsqr $version's dist/jsQR.js" \
		"(copy it again from that package, or pin the version it came from)" >&2
	rc=1
fi
if ! cmp "$pkg/LICENSE" "$door/vendor/jsQR.LICENSE"; then
	echo "check_vendor: FAIL: src/door/vendor/jsQR.LICENSE is not jsqr $version's LICENSE" >&2
	rc=1
fi
[ $rc = 0 ] && echo "check_vendor: ok: src/door/vendor/jsQR.js is jsqr $version's dist/jsQR.js, byte for byte"
exit $rc
