#!/bin/sh
# fresh.sh COMMAND...: the README's commands on a fresh Debian 12.
# fresh.sh --readme: the commands of the README's first code block (its first
# indented lines, each up to its '#' comment): `make demo`, `make test`.
#
# Makes a minbase Debian 12 chroot with debootstrap from this machine's own
# apt sources (git, make and ca-certificates in it, as `debootstrap
# --variant=minbase --include=git,make,ca-certificates` leaves it), copies in
# the host's CA certificates, /etc/hosts and /etc/resolv.conf as a real
# machine has them, clones this checkout's HEAD into /root/stagedoor and runs
# each COMMAND there in turn (a shell line such as "make demo"), as root, with
# a clean environment, no locale, stdin from /dev/null and no controlling
# terminal.  Stops at the first command that fails.  Whatever happened,
# every process left in the chroot is killed, everything mounted in it is
# unmounted, and the chroot is removed (FRESH_KEEP=1 keeps its files).
#
# For each command it prints the exit status, the wall time, and the
# packages and disk it installed (dpkg's Installed-Size, and the whole
# chroot's growth), then repeats the last "N passed, N failed" line the
# commands printed, so that the run closes on the tests' verdict.
#
# Cache: only the bare debootstrap result, as a tarball in FRESH_CACHE
# (default /var/cache/stagedoor-fresh), made again after 7 days or when the
# mirror changes; never anything the commands installed.  The chroot lives in
# FRESH_DIR (default /var/tmp/stagedoor-fresh).  Needs root.
set -eu

suite=bookworm
include=git,make,ca-certificates
cache=${FRESH_CACHE:-/var/cache/stagedoor-fresh}
work=${FRESH_DIR:-/var/tmp/stagedoor-fresh}
root=$work/root
src=$(git rev-parse --show-toplevel)
log=$work/commands.log

say() { printf 'fresh: %s\n' "$*"; }
die() { printf 'fresh: %s\n' "$*" >&2; exit 1; }

if [ "${1:-}" = --readme ]; then
	readme_cmds=$(awk '/^    [^ ]/ { sub(/^    /, ""); sub(/[ \t]*#.*$/, ""); print; seen = 1; next }
		seen { exit }' "$src/README.md")
	[ -n "$readme_cmds" ] || die "no commands in the first code block of $src/README.md"
	set --
	nl='
'
	old_ifs=$IFS
	IFS=$nl
	for c in $readme_cmds; do set -- "$@" "$c"; done
	IFS=$old_ifs
fi
[ "$#" -gt 0 ] || die "usage: tools/fresh.sh COMMAND... (e.g. \"make demo\" \"make test\")"
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts): run as root or with sudo"

# ---- the chroot (tools/chroot.sh), removed whatever happens -------------
tag=fresh
keep=${FRESH_KEEP:-0}
. "$src/tools/chroot.sh"
chroot_make

if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
	say "note: uncommitted changes in $src are not in the clone (it is HEAD)"
fi
git clone --quiet --no-hardlinks "$src" "$root/root/stagedoor"
say "clone of $(git -C "$src" rev-parse --short HEAD) in $root/root/stagedoor"

# ---- the commands, with what each installed -------------------------------
pkgs() {
	in_chroot "dpkg-query -W -f '\${db:Status-Abbrev}\n'" | awk '$1 == "ii" { n++ } END { print n + 0 }'
}
pkg_kib() {
	in_chroot "dpkg-query -W -f '\${db:Status-Abbrev} \${Installed-Size}\n'" |
		awk '$1 == "ii" { s += $2 } END { print s + 0 }'
}
disk_kib() { du -sxk "$root" | cut -f1; }

: >"$log"
summary=""
status=0
for cmd in "$@"; do
	p0=$(pkgs); k0=$(pkg_kib); d0=$(disk_kib); t0=$(date +%s)
	say "running '$cmd' in the chroot (clean environment, no terminal)"
	rcf=$work/rc
	# in the background, and waited for: a signal to this script runs its
	# trap at once (a foreground command would defer it until it ended)
	rm -f "$rcf"
	{ in_chroot "cd /root/stagedoor && $cmd" 2>&1 && echo 0 >"$rcf" || echo $? >"$rcf"; } |
		tee -a "$log" &
	wait $! || true
	rc=$(cat "$rcf" 2>/dev/null || echo 1)
	t1=$(date +%s); p1=$(pkgs); k1=$(pkg_kib); d1=$(disk_kib)
	line=$(printf "'%s': exit %s in %s s; +%s packages (%s in all), +%s MiB installed, chroot +%s MiB" \
		"$cmd" "$rc" $((t1 - t0)) $((p1 - p0)) "$p1" $(((k1 - k0) / 1024)) $(((d1 - d0) / 1024)))
	summary="$summary$line
"
	if [ "$rc" != 0 ]; then
		status=$rc
		break
	fi
done

printf '\n'
printf '%s' "$summary" | while IFS= read -r l; do say "$l"; done
[ "$status" = 0 ] && say "ok: the commands passed on a fresh Debian $suite" ||
	say "FAILED: '$cmd' exited $status on a fresh Debian $suite"
verdict=$(grep -E '^([A-Za-z]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)
[ -n "$verdict" ] && printf '%s\n' "$verdict"
exit "$status"
