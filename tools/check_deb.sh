#!/bin/sh
# check_deb.sh --deb NEW.deb --old REV --man1 F --man5 F --completion F
#
# make check-deb: the Debian package on a fresh minbase Debian 12 chroot
# (tools/chroot.sh, as tools/fresh.sh makes it), as root.
#
# 1. The previous release: REV (v0.1.0) from git archive, built, and packaged
#    by this tree's tools/deb.sh.  That release has no `help --man`, so its
#    package carries the man pages and completion given here (this build's).
# 2. A fresh install of NEW.deb with apt-get (its Depends from the mirror):
#    every file where the package says, the stagedoor user, /var/lib/stagedoor
#    0700 and filled by init, nothing started, a log rotated by its logrotate
#    entry.  `stagedoor run` from the
#    installed files as the stagedoor user (no systemd in a chroot: started as
#    the unit would, with the installed configuration, a maildir and an HTTP
#    port on loopback), an order placed over HTTP with the api.token, its
#    tickets email in the maildir once, SIGTERM, `stagedoor check`.  Then
#    apt-get purge, and nothing of the package's is left.
# 3. An upgrade: the old package installed (after that purge: the user is
#    still there, as Debian keeps it), its run selling orders; more orders
#    just before `apt-get install NEW.deb`; then (systemd's part) SIGTERM to
#    the old run while orders still come in, and the new binary started; the
#    orders whose answers were lost are sent again with their Idempotency-
#    Keys.  Every order's tickets email is in the maildir exactly once,
#    `stagedoor check` passes, the schema version went up, a local edit of
#    the conffile is kept.
# 4. apt-get purge again: left are exactly the stagedoor user and group, and
#    no file anywhere belongs to them.
#
# Prints each step with its time and closes on "check-deb: ok" or a
# "check-deb: FAILED: ..." line (exit 1).  CHECK_DEB_DIR (default
# /var/tmp/stagedoor-check-deb) holds the chroot and the logs;
# CHECK_DEB_KEEP=1 keeps the chroot's files; CHECK_DEB_PORT (47180) is the
# loopback port of the box's HTTP API.
set -eu

say() { printf 'check-deb: %s (%s s)\n' "$*" $(($(date +%s) - t_start)); }
die() { printf 'check-deb: FAILED: %s\n' "$*" >&2; exit 1; }
usage() {
	die "usage: tools/check_deb.sh --deb NEW.deb --old REV --man1 F --man5 F --completion F"
}
t_start=$(date +%s)

new_deb=""
old_rev=""
man1=""
man5=""
completion=""
while [ "$#" -gt 0 ]; do
	[ "$#" -ge 2 ] || usage
	case $1 in
	--deb) new_deb=$2 ;;
	--old) old_rev=$2 ;;
	--man1) man1=$2 ;;
	--man5) man5=$2 ;;
	--completion) completion=$2 ;;
	*) usage ;;
	esac
	shift 2
done
[ -n "$new_deb" ] && [ -n "$old_rev" ] && [ -n "$man1" ] && [ -n "$man5" ] && [ -n "$completion" ] ||
	usage
[ -f "$new_deb" ] || die "$new_deb: no such file (make deb first)"
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts): run as root or with sudo"

src=$(cd "$(dirname "$0")/.." && pwd)
work=${CHECK_DEB_DIR:-/var/tmp/stagedoor-check-deb}
port=${CHECK_DEB_PORT:-47180}
new_ver=$(dpkg-deb -f "$new_deb" Version)
mkdir -p "$work"
rm -rf "$work/old-src" "$work/debs" "$work"/*.log
mkdir -p "$work/debs"

# ---- 1. the previous release's package --------------------------------------
# A clone that did not fetch the release tags still has the releases' commits.
if ! git -C "$src" rev-parse --verify --quiet "$old_rev^{commit}" >/dev/null; then
	case $old_rev in
	v0.1.0) old_rev=d213cd7b930b82b3df161aead42f3ff59929b02f ;;
	esac
fi
git -C "$src" rev-parse --verify --quiet "$old_rev^{commit}" >/dev/null ||
	die "no revision $old_rev in $src (git tag v0.1.0 d213cd7)"
mkdir -p "$work/old-src"
git -C "$src" archive "$old_rev" | tar -x -C "$work/old-src"
make -C "$work/old-src" bin/stagedoor >"$work/old-build.log" 2>&1 ||
	{ tail -n 30 "$work/old-build.log" >&2; die "$old_rev does not build (log: $work/old-build.log)"; }
old_ver=$("$work/old-src/bin/stagedoor" --version | awk 'NR == 1 { print $2 }')
[ -n "$old_ver" ] || die "$old_rev's binary prints no version"
dpkg --compare-versions "$new_ver" gt "$old_ver" ||
	die "the new package's version $new_ver is not above $old_rev's $old_ver"
# $old_rev has no `help --man`: its package takes this build's pages
old_deb=$(sh "$src/tools/deb.sh" --version "$old_ver" --bin "$work/old-src/bin/stagedoor" \
	--man1 "$man1" --man5 "$man5" --completion "$completion" --out "$work/debs" 2>>"$work/old-build.log")
cp "$new_deb" "$work/debs/"
new_name=${new_deb##*/}
old_name=${old_deb##*/}
say "packages: $old_name ($old_rev), $new_name"

# ---- the chroot -------------------------------------------------------------
# the same bare system as tools/fresh.sh's, so that its cached tarball serves
suite=bookworm
include=git,make,ca-certificates
cache=${FRESH_CACHE:-/var/cache/stagedoor-fresh}
root=$work/root
keep=${CHECK_DEB_KEEP:-0}
tag=check-deb
. "$src/tools/chroot.sh"
# (a run left by a failed step is killed by chroot.sh's cleanup, as everything
# whose root is the chroot)
run_pid=""
chroot_make
say "fresh $suite chroot in $root"
mkdir -p "$root/tmp/debs"
cp "$work/debs/$old_name" "$work/debs/$new_name" "$root/tmp/debs/"

# q LINE: LINE in the chroot, its output in the step log; fails the check
# with that log's tail when it fails
q() {
	if ! in_chroot "$1" >>"$work/steps.log" 2>&1; then
		tail -n 30 "$work/steps.log" >&2
		die "in the chroot: $1 (log: $work/steps.log)"
	fi
}
# as_box LINE: LINE in the chroot as the stagedoor user, from /
as_box() {
	in_chroot "cd / && runuser -u stagedoor -- $1"
}
apt_get() { # apt_get ARGS: quiet, its log kept, its output to stdout
	in_chroot "DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 $1" >"$work/apt.out" 2>&1 ||
		{ tail -n 30 "$work/apt.out" >&2; die "apt-get $1"; }
	cat "$work/apt.out" >>"$work/apt.log"
}

# The box as its unit runs it: the stagedoor user (setpriv execs, so $! is
# run's own pid), the installed configuration, a clean environment; a
# maildir and a loopback port given as flags.  Its log is $work/run-TAG.log.
start_box() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 chroot "$root" \
		setpriv --reuid=stagedoor --regid=stagedoor --init-groups \
		/usr/bin/stagedoor run --config /etc/stagedoor/stagedoor.conf \
		--mail-url maildir:/var/lib/stagedoor/maildir --http-listen "127.0.0.1:$port" \
		</dev/null >>"$work/run-$1.log" 2>&1 &
	run_pid=$!
	i=0
	until in_chroot "curl -fsS -o /dev/null http://127.0.0.1:$port/healthz" 2>/dev/null; do
		kill -0 "$run_pid" 2>/dev/null ||
			{ cat "$work/run-$1.log" >&2; die "stagedoor run ($1) exited at start"; }
		i=$((i + 1))
		[ "$i" -lt 60 ] || die "stagedoor run ($1) did not answer /healthz in 30 s"
		sleep 0.5
	done
}
# stop_box: SIGTERM, as systemd stops it; run must exit 0 within its grace
stop_box() {
	kill -TERM "$run_pid"
	rc=0
	wait "$run_pid" || rc=$?
	run_pid=""
	[ "$rc" = 0 ] || die "stagedoor run exited $rc on SIGTERM"
}

# order N TAG: N orders of 2 seats over HTTP with the api.token, each with
# its own Idempotency-Key (TAG-i), for the event in /tmp/event; their ids
# appended to $work/orders.txt.  The same TAG again gets the same orders
# (the key's first answer) and places only those that never got in.
# order_while_stopping N TAG: the same in the background, going on past
# requests that fail (the box stops under them); ids not kept.
cat >"$work/order.sh" <<'EOF_ORDER'
n=$1 tag=$2 port=$3 tolerant=${4:-}
t=$(cat /var/lib/stagedoor/api.token)
event=$(cat /tmp/event)
i=0
while [ "$i" -lt "$n" ]; do
	i=$((i + 1))
	curl -fsS --max-time 20 -X POST -H "Authorization: Bearer $t" -H "Idempotency-Key: $tag-$i" \
		-H 'Content-Type: application/json' \
		-d "{\"event_id\":$event,\"name\":\"Buyer $tag $i\",\"email\":\"buyer-$tag-$i@example.org\",\"seats\":2}" \
		"http://127.0.0.1:$port/v1/orders" || [ -n "$tolerant" ] || exit 1
	echo
done
EOF_ORDER
cp "$work/order.sh" "$root/tmp/order.sh"
order() {
	in_chroot "sh /tmp/order.sh $1 $2 $port" >"$work/order.out" 2>&1 ||
		{ cat "$work/order.out" >&2; die "POST /v1/orders failed"; }
	sed -n 's/^{"id": *"\([A-Za-z0-9_-]*\)".*/\1/p' "$work/order.out" >"$work/order.ids"
	[ "$(wc -l <"$work/order.ids")" = "$1" ] || die "not $1 order ids in: $(cat "$work/order.out")"
	cat "$work/order.ids" >>"$work/orders.txt"
}
order_while_stopping() {
	in_chroot "sh /tmp/order.sh $1 $2 $port tolerant" >"$work/order-stopping.out" 2>&1 &
	order_pid=$!
}

# mails_per_order: "COUNT ORDER_ID" for the tickets emails in the maildir
# (Message-ID <tickets-...>), by the "Order ID" line of each one's text
# (its lines end in CRLF)
mails_per_order() {
	in_chroot "for f in /var/lib/stagedoor/maildir/new/*; do
		[ -f \"\$f\" ] && grep -q '^Message-ID: <tickets-' \"\$f\" || continue
		sed -n 's/^Order \([A-Za-z0-9_-]*\).*/\1/p' \"\$f\" | head -n 1; done" |
		sort | uniq -c | awk '{ print $1, $2 }'
}
# wait_mails: until every order in orders.txt has its email (60 s at most);
# then each exactly once, and none for another order
wait_mails() {
	n=$(sort -u "$work/orders.txt" | wc -l)
	i=0
	while [ "$(mails_per_order | wc -l)" -lt "$n" ]; do
		i=$((i + 1))
		[ "$i" -lt 120 ] || die "after 60 s, $(mails_per_order | wc -l) of $n orders have their email"
		sleep 0.5
	done
	mails_per_order >"$work/mails.txt"
	awk '$1 != 1 { print "order " $2 ": " $1 " tickets emails"; bad = 1 } END { exit bad }' \
		"$work/mails.txt" >&2 || die "an order's tickets were emailed more than once"
	awk '{ print $2 }' "$work/mails.txt" | sort >"$work/mailed.txt"
	sort -u "$work/orders.txt" | cmp -s - "$work/mailed.txt" ||
		die "the emails are not the orders': $(sort -u "$work/orders.txt" | diff - "$work/mailed.txt" | head)"
}
# check_box: `stagedoor check` on the drained box (the sales counters may
# trail the emails by a moment)
check_box() {
	i=0
	until as_box "/usr/bin/stagedoor check" >"$work/check.out" 2>&1; do
		i=$((i + 1))
		[ "$i" -lt 60 ] || { cat "$work/check.out" >&2; die "stagedoor check failed"; }
		sleep 0.5
	done
}
# schema_version: as `stagedoor init` (idempotent) prints it
schema_version() {
	as_box "/usr/bin/stagedoor init" 2>&1 | sed -n 's/.*schema version \([0-9]*\).*/\1/p'
}

# Every path of a package's files and folders of its own (not /usr, /etc, ...)
package_paths() {
	dpkg-deb -c "$1" | awk '{ print substr($6, 2) }' | sed 's|/$||' | grep stagedoor
}
# nothing_left: none of the package's paths, folders it made, or files of its user
nothing_left() {
	for p in $(package_paths "$work/debs/$new_name") /etc/stagedoor /var/lib/stagedoor \
		/var/log/stagedoor /var/lib/dpkg/info/stagedoor.list; do
		[ ! -e "$root$p" ] || die "after purge, $p is still there"
	done
	left=$(in_chroot "find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run \
		-o -path /tmp/debs \) -prune -o \( -name '*stagedoor*' -o -user stagedoor \) -print")
	[ -z "$left" ] || die "after purge, still there: $left"
	in_chroot "dpkg-query -W -f='\${db:Status-Abbrev}' stagedoor 2>/dev/null | grep -q '^i'" &&
		die "after purge, dpkg still has stagedoor installed"
	return 0
}

# ---- 2. a fresh install -------------------------------------------------------
apt_get "update -qq"
apt_get "install --no-install-recommends curl logrotate"
say "curl (the test's HTTP client) and logrotate installed in the chroot"
apt_get "install --no-install-recommends ./tmp/debs/$new_name"
grep -q 'stagedoor: installed, not started' "$work/apt.out" ||
	die "the postinst did not say it installed without starting: $(cat "$work/apt.out")"
say "apt-get install ./$new_name: $(grep -c '^Setting up ' "$work/apt.out") packages set up"

for p in $(dpkg-deb -c "$work/debs/$new_name" | awk '{ print substr($6, 2) }'); do
	[ -e "$root$p" ] || die "installed, but $p is missing"
done
q "dpkg-query -W -f='\${db:Status-Abbrev}' stagedoor | grep -q '^ii'"
q "test \"\$(getent passwd stagedoor | cut -d: -f6,7)\" = /var/lib/stagedoor:/usr/sbin/nologin"
q "test \"\$(stat -c '%a %U %G' /var/lib/stagedoor)\" = '700 stagedoor stagedoor'"
q "test \"\$(stat -c '%a %U' /var/lib/stagedoor/stagedoor.db)\" = '600 stagedoor'"
q "test \"\$(stat -c '%a %U' /var/lib/stagedoor/api.token)\" = '600 stagedoor'"
q "test \"\$(stat -c '%a %U' /var/lib/stagedoor/ticket.key)\" = '600 stagedoor'"
q "grep -q '^ExecStart=/usr/bin/stagedoor run ' /lib/systemd/system/stagedoor.service"
for p in $(in_root_pids); do
	case $(readlink "/proc/$p/exe" 2>/dev/null) in
	*/stagedoor) die "the install started stagedoor (pid $p)" ;;
	esac
done
# the logrotate entry rotates a log of the box's, as the stagedoor user
q "runuser -u stagedoor -- sh -c 'echo line >>/var/log/stagedoor/stagedoor.log' &&
	logrotate -f /etc/logrotate.d/stagedoor &&
	test \"\$(stat -c '%a %U' /var/log/stagedoor/stagedoor.log)\" = '640 stagedoor' &&
	test \"\$(stat -c '%U' /var/log/stagedoor/stagedoor.log.1)\" = stagedoor"
binver=$(in_chroot "stagedoor --version" | awk 'NR == 1 { print $2 }')
[ "$binver" = "$new_ver" ] || die "the installed binary says version $binver, the package $new_ver"
say "the files are where the package says; user, 0700 state folder and database made; nothing started; logrotate rotates its log"

as_box "/usr/bin/stagedoor event add --name 'Fresh night' --venue Hall --starts-at 2036-06-01T20:00Z --capacity 500" \
	>"$work/event.out" 2>"$work/event.err" || die "event add: $(cat "$work/event.err")"
tail -n 1 "$work/event.out" >"$root/tmp/event"
start_box fresh
: >"$work/orders.txt"
order 1 fresh
say "order $(cat "$work/orders.txt") placed over HTTP"
wait_mails
check_box
stop_box
check_box
say "its tickets email is in the maildir once; run stopped on SIGTERM; stagedoor check: $(tail -n 1 "$work/check.out")"

apt_get "purge stagedoor"
grep -q "stagedoor: purged" "$work/apt.out" || die "the postrm printed no note on purge"
nothing_left
q "getent passwd stagedoor >/dev/null"
say "apt-get purge: nothing of the package left but the stagedoor user"

# ---- 3. an upgrade from the previous release ---------------------------------
apt_get "install --no-install-recommends ./tmp/debs/$old_name"
v_old=$(sed -n 's/.*schema version \([0-9]*\).*/\1/p' "$work/apt.out")
[ -n "$v_old" ] || die "$old_name's postinst ran no init: $(cat "$work/apt.out")"
q "test \"\$(stagedoor --version | head -n 1)\" = 'stagedoor $old_ver'"
echo "# a local edit, kept across the upgrade" >>"$root/etc/stagedoor/stagedoor.conf"
as_box "/usr/bin/stagedoor event add --name 'Upgrade night' --venue Hall --starts-at 2036-06-02T20:00Z --capacity 500" \
	>"$work/event.out" 2>"$work/event.err" || die "event add: $(cat "$work/event.err")"
tail -n 1 "$work/event.out" >"$root/tmp/event"
start_box old
: >"$work/orders.txt"
order 20 before
wait_mails
say "$old_ver (schema version $v_old) sold 20 orders, each emailed once"
# orders in flight across the upgrade: a burst just before apt-get, and more
# on the old run after it (its binary already replaced on disk) while it gets
# SIGTERM: what its jobs had not done, the new run does
order 30 burst
apt_get "install --no-install-recommends ./tmp/debs/$new_name"
say "$(sort -u "$work/orders.txt" | wc -l) orders placed; apt-get install ./$new_name while the old run ran"
order_while_stopping 40 during
sleep 0.5
stop_box
wait "$order_pid" || true
sent=$(mails_per_order | wc -l)
got=$(grep -c '^{"id"' "$work/order-stopping.out" || true)
say "the old run stopped on SIGTERM among orders: $got of 40 answered, $sent orders emailed"
start_box new
# the 40 again with their keys: the ones the old run took are the same orders
order 40 during
wait_mails
check_box
v_new=$(schema_version)
[ -n "$v_new" ] && [ "$v_new" -gt "$v_old" ] ||
	die "the schema version did not move up: $v_old before, '$v_new' after"
grep -qx '# a local edit, kept across the upgrade' "$root/etc/stagedoor/stagedoor.conf" ||
	die "the upgrade lost the local edit of /etc/stagedoor/stagedoor.conf"
stop_box
check_box
say "new run: every one of $(wc -l <"$work/mails.txt") orders emailed exactly once; stagedoor check: $(tail -n 1 "$work/check.out"); schema version $v_old -> $v_new; conffile edit kept"

# ---- 4. purge ------------------------------------------------------------------
apt_get "purge stagedoor"
nothing_left
q "getent passwd stagedoor >/dev/null && getent group stagedoor >/dev/null"
uid=$(in_chroot "id -u stagedoor")
say "purged: left are the system user stagedoor (uid $uid) and its group, as Debian keeps them; no file is theirs"
say "ok"
