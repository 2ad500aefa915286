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

# ---- host tools -----------------------------------------------------------
need=""
command -v debootstrap >/dev/null 2>&1 || need="$need debootstrap"
command -v setsid >/dev/null 2>&1 || need="$need util-linux"
if [ -n "$need" ]; then
	say "installing on the host:$need"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null ||
		die "apt-get install$need failed"
fi

# ---- the machine's own Debian mirrors, from apt's view of its sources -----
# `apt-cache policy` names each source with its release line; the first
# Debian main for the suite and its security suite are the mirrors.
mirrors() {
	apt-cache policy | awk -v s="$1" -v l="$2" '
		/^ *[0-9]+ (https?|ftp):/ { url = $2; next }
		/^ *release / && index($0, "n=" s ",l=" l ",c=main,") { print url; exit }'
}
mirror=$(mirrors "$suite" Debian)
if [ -z "$mirror" ]; then
	DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
	mirror=$(mirrors "$suite" Debian)
fi
[ -n "$mirror" ] || die "no Debian $suite main source in this machine's apt sources"
security=$(mirrors "$suite-security" Debian-Security)

# ---- cleanup, whatever happens from here on -------------------------------
# Kill what still runs with its root in the chroot, unmount from the deepest
# mount point up, then remove the folder once nothing is mounted below it.
in_root_pids() {
	for p in /proc/[0-9]*; do
		r=$(readlink "$p/root" 2>/dev/null) || continue
		case $r in "$root" | "$root"/*) echo "${p#/proc/}" ;; esac
	done
}
mounts_below() {
	awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r
}
cleanup() {
	rc=$?
	set +e
	trap - EXIT INT TERM HUP
	for sig in TERM KILL; do
		pids=$(in_root_pids)
		[ -n "$pids" ] && kill -s "$sig" $pids 2>/dev/null
		[ -n "$pids" ] && sleep 1
	done
	for m in $(mounts_below); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
			printf 'fresh: could not unmount %s\n' "$m" >&2
	done
	if [ -n "$(mounts_below)" ]; then
		printf 'fresh: still mounted below %s; left in place\n' "$root" >&2
		rc=1
	elif [ "${FRESH_KEEP:-0}" = 1 ]; then
		printf 'fresh: kept %s (nothing mounted)\n' "$root" >&2
	else
		rm -rf "$root"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# a chroot left mounted by an earlier run that could not clean up
[ -z "$(mounts_below)" ] || cleanup_first=1
if [ "${cleanup_first:-0}" = 1 ]; then
	say "an earlier chroot is still mounted under $root: unmounting it"
	for m in $(mounts_below); do umount "$m" 2>/dev/null || umount -l "$m"; done
fi
rm -rf "$root"
mkdir -p "$cache" "$work"

# ---- the bare debootstrap result, cached as a tarball ---------------------
key=$(printf '%s %s %s' "$suite" "$mirror" "$include" | sha256sum | cut -c1-12)
tarball=$cache/$suite-minbase-$key.tar
if [ -f "$tarball" ] && [ -z "$(find "$tarball" -mtime +7)" ]; then
	say "bare $suite from the cache ($tarball)"
else
	say "debootstrap --variant=minbase --include=$include $suite from $mirror"
	rm -rf "$cache/build"
	t0=$(date +%s)
	debootstrap --variant=minbase --include="$include" "$suite" "$cache/build" "$mirror" \
		>"$cache/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$cache/debootstrap.log" >&2; die "debootstrap failed (log: $cache/debootstrap.log)"; }
	tar -C "$cache/build" --numeric-owner -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	rm -rf "$cache/build"
	find "$cache" -name "$suite-minbase-*.tar" ! -name "${tarball##*/}" -delete
	say "debootstrap took $(($(date +%s) - t0)) s"
fi
mkdir -p "$root"
tar -C "$root" --numeric-owner -xpf "$tarball"

# ---- what a real machine has beside the base system -----------------------
# apt sources as Debian 12's installer writes them: the mirror with updates,
# and security where this machine has it.
rm -f "$root/etc/apt/sources.list"
{
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' \
		"$mirror" "$suite" "$suite"
	printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
	if [ -n "$security" ]; then
		printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' \
			"$security" "$suite"
		printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
	fi
} >"$root/etc/apt/sources.list.d/debian.sources"
cp /etc/hosts "$root/etc/hosts"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
if [ -d /usr/local/share/ca-certificates ]; then
	cp -R /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"

# in_chroot LINE: LINE in the chroot, as root, clean environment, no terminal
in_chroot() {
	setsid -w env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/sh \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		chroot "$root" /bin/sh -c "$1" </dev/null
}
in_chroot "update-ca-certificates >/dev/null 2>&1"

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
