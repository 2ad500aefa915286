# chroot.sh: a fresh minbase Debian chroot, for tools/fresh.sh and
# tools/check_deb.sh.  Sourced, not run: the caller sets
#
#   suite    the Debian release (bookworm)
#   include  the packages debootstrap adds to minbase (e.g. git,make,ca-certificates)
#   cache    where the bare debootstrap result is kept as a tarball
#   root     the chroot's folder (removed first, and at the end)
#   keep     1: leave the chroot's files at the end (nothing stays mounted)
#   tag      the prefix of this file's lines (e.g. fresh)
#
# and defines say and die.  chroot_make makes the chroot from this machine's
# own apt sources (debootstrap --variant=minbase, cached for 7 days or until
# the mirror changes; never anything installed later), with the host's CA
# certificates, /etc/hosts and /etc/resolv.conf as a real machine has them,
# /proc, /sys, /dev, /dev/shm and /run mounted, and an EXIT trap that, however
# the caller ends, kills every process whose root is in the chroot,
# unmounts everything below it from the deepest mount point up and removes
# it.  in_chroot LINE runs a shell line in it, as root, with a clean
# environment, no locale, stdin from /dev/null and no controlling terminal.
# Needs root.

# ---- host tools -----------------------------------------------------------
chroot_host_tools() {
	need=""
	command -v debootstrap >/dev/null 2>&1 || need="$need debootstrap"
	command -v setsid >/dev/null 2>&1 || need="$need util-linux"
	if [ -n "$need" ]; then
		say "installing on the host:$need"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null ||
			die "apt-get install$need failed"
	fi
}

# ---- the machine's own Debian mirrors, from apt's view of its sources -----
# `apt-cache policy` names each source with its release line; the first
# Debian main for the suite and its security suite are the mirrors.
mirrors() {
	apt-cache policy | awk -v s="$1" -v l="$2" '
		/^ *[0-9]+ (https?|ftp):/ { url = $2; next }
		/^ *release / && index($0, "n=" s ",l=" l ",c=main,") { print url; exit }'
}
chroot_mirrors() {
	mirror=$(mirrors "$suite" Debian)
	if [ -z "$mirror" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
		mirror=$(mirrors "$suite" Debian)
	fi
	[ -n "$mirror" ] || die "no Debian $suite main source in this machine's apt sources"
	security=$(mirrors "$suite-security" Debian-Security)
}

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
# chroot_kill: every process left in the chroot, TERM then KILL
chroot_kill() {
	for sig in TERM KILL; do
		pids=$(in_root_pids)
		[ -n "$pids" ] && kill -s "$sig" $pids 2>/dev/null
		[ -n "$pids" ] && sleep 1
	done
	return 0
}
cleanup() {
	rc=$?
	set +e
	trap - EXIT INT TERM HUP
	chroot_kill
	for m in $(mounts_below); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
			printf '%s: could not unmount %s\n' "$tag" "$m" >&2
	done
	if [ -n "$(mounts_below)" ]; then
		printf '%s: still mounted below %s; left in place\n' "$tag" "$root" >&2
		rc=1
	elif [ "${keep:-0}" = 1 ]; then
		printf '%s: kept %s (nothing mounted)\n' "$tag" "$root" >&2
	else
		rm -rf "$root"
	fi
	exit "$rc"
}

# in_chroot LINE: LINE in the chroot, as root, clean environment, no terminal
in_chroot() {
	setsid -w env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/sh \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		chroot "$root" /bin/sh -c "$1" </dev/null
}

chroot_make() {
	chroot_host_tools
	chroot_mirrors
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP

	# a chroot left mounted by an earlier run that could not clean up
	if [ -n "$(mounts_below)" ]; then
		say "an earlier chroot is still mounted under $root: unmounting it"
		for m in $(mounts_below); do umount "$m" 2>/dev/null || umount -l "$m"; done
	fi
	rm -rf "$root"
	mkdir -p "$cache" "$root"

	# ---- the bare debootstrap result, cached as a tarball -------------
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
	tar -C "$root" --numeric-owner -xpf "$tarball"

	# ---- what a real machine has beside the base system ---------------
	# apt sources as Debian 12's installer writes them: the mirror with
	# updates, and security where this machine has it.
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

	in_chroot "update-ca-certificates >/dev/null 2>&1"
}
