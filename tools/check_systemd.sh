#!/bin/sh
# check_systemd.sh --deb NEW.deb
#
# make check-deb, its last part: the package under a real systemd.  A fresh
# minbase Debian 12 with systemd, systemd-sysv and dbus (tools/chroot.sh),
# NEW.deb installed with apt-get, booted with systemd-nspawn (-b,
# --register=no, --keep-unit); every step runs inside through nsenter, as an
# administrator would type it:
#
# 1. `systemctl enable --now stagedoor` with the shipped unit and the
#    shipped configuration's example lines for an HTTP port, a log file and
#    backup_dir = /var/backups/stagedoor: active, READY with its STATUS=, and
#    a periodic backup lands in /var/backups/stagedoor (the unit lets it
#    write there; the package made the folder).
# 2. `systemctl reload stagedoor` succeeds on a minimal system (no procps),
#    and the package's logrotate entry rotates the log with its postrotate
#    reload (no `|| true` hides a failure): the box writes to the new file.
# 3. The HTTP port taken by another process: `systemctl start stagedoor`
#    fails within seconds (not after TimeoutStartSec), with status 78, not
#    restarted, and the journal names the address and the reason.
# 4. A timezone the tz database lacks: the start fails with status 78, not
#    restarted, the journal names it; with Europe/Berlin the box's whoami
#    gives the zone and its abbreviations.
#
# Prints each step with its time and closes on "check-systemd: ok" or a
# "check-systemd: FAILED: ..." line (exit 1).  CHECK_SYSTEMD_DIR (default
# /var/tmp/stagedoor-check-systemd) holds the root and the logs;
# CHECK_SYSTEMD_KEEP=1 keeps the root's files; CHECK_SYSTEMD_PORT (47190)
# is the box's HTTP port on loopback.  Needs root and systemd-nspawn
# (systemd-container).
set -eu

say() { printf 'check-systemd: %s (%s s)\n' "$*" $(($(date +%s) - t_start)); }
die() {
	printf 'check-systemd: FAILED: %s\n' "$*" >&2
	[ -n "${leader:-}" ] && c "journalctl -u stagedoor --no-pager -n 40" >&2 2>/dev/null
	exit 1
}
t_start=$(date +%s)

[ "${1:-}" = --deb ] && [ -n "${2:-}" ] || die "usage: tools/check_systemd.sh --deb NEW.deb"
new_deb=$2
[ -f "$new_deb" ] || die "$new_deb: no such file (make deb first)"
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mounts, systemd-nspawn)"
command -v systemd-nspawn >/dev/null 2>&1 || die "no systemd-nspawn: apt-get install systemd-container"

src=$(cd "$(dirname "$0")/.." && pwd)
work=${CHECK_SYSTEMD_DIR:-/var/tmp/stagedoor-check-systemd}
port=${CHECK_SYSTEMD_PORT:-47190}
name=${new_deb##*/}
mkdir -p "$work"
rm -f "$work"/*.log

suite=bookworm
include=systemd,systemd-sysv,dbus,ca-certificates
cache=${FRESH_CACHE:-/var/cache/stagedoor-fresh}
root=$work/root
keep=${CHECK_SYSTEMD_KEEP:-0}
tag=check-systemd
leader=""
. "$src/tools/chroot.sh"
chroot_make
# the booted system's processes are in their own namespaces, out of
# chroot.sh's sight: its PID 1 is killed (and with it all of them) first
off() {
	r=$1
	if [ -n "$leader" ]; then
		kill -KILL "$leader" 2>/dev/null || true
		for i in $(seq 1 50); do kill -0 "$leader" 2>/dev/null || break; sleep 0.1; done
	fi
	(exit "$r")
	cleanup
}
trap 'off $?' EXIT
say "fresh $suite with systemd in $root"

# ---- the package, installed as apt-get installs it --------------------------
cp "$new_deb" "$root/tmp/"
in_chroot "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	curl logrotate /tmp/$name" >"$work/apt.log" 2>&1 ||
	{ tail -n 20 "$work/apt.log" >&2; die "apt-get install ./$name failed"; }
# the shipped configuration, its example lines for a port, a log file and
# periodic backups uncommented as an administrator would
conf=$root/etc/stagedoor/stagedoor.conf
sed -i -e "s|^# http_listen = 127.0.0.1:8080 |http_listen = 127.0.0.1:$port |" \
	-e 's|^# log_file = |log_file = |' -e 's|^# backup_dir = |backup_dir = |' "$conf"
grep -q "^http_listen = 127.0.0.1:$port" "$conf" && grep -q '^log_file = ' "$conf" &&
	grep -q '^backup_dir = /var/backups/stagedoor' "$conf" ||
	die "the shipped stagedoor.conf has no example line for http_listen, log_file or backup_dir"
printf 'workers = 1\nbackup_interval_ms = 5000\n' >>"$conf"
[ -d "$root/var/backups/stagedoor" ] || die "the package made no /var/backups/stagedoor"
say "$name installed; http_listen, log_file and backup_dir uncommented"

# ---- boot ---------------------------------------------------------------------
# nspawn mounts /proc, /sys and /dev itself
for m in $(mounts_below); do umount "$m" 2>/dev/null || umount -l "$m"; done
setsid systemd-nspawn -q -D "$root" -b --register=no --keep-unit --console=passive \
	>"$work/boot.log" 2>&1 </dev/null &
# its PID 1: a systemd that is PID 1 of a PID namespace under nspawn's
nspawn=$!
for i in $(seq 1 300); do
	for s in /proc/[0-9]*/status; do
		p=${s%/status}
		p=${p#/proc/}
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = systemd ] || continue
		awk '$1 == "NSpid:" && NF == 3 && $3 == 1 { ok = 1 } END { exit !ok }' "$s" 2>/dev/null ||
			continue
		a=$p
		while [ "$a" -gt 1 ] && [ "$a" != "$nspawn" ]; do
			a=$(awk '$1 == "PPid:" { print $2 }' "/proc/$a/status" 2>/dev/null || echo 1)
		done
		[ "$a" = "$nspawn" ] && leader=$p && break
	done
	[ -n "$leader" ] && break
	sleep 0.1
done
[ -n "$leader" ] || { cat "$work/boot.log" >&2; die "the container's systemd did not start"; }

# c LINE: LINE inside the booted system, as root
c() {
	nsenter -t "$leader" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
		/bin/sh -c "$1" </dev/null
}
state=$(c "timeout 120 systemctl is-system-running --wait" || true)
case $state in running | degraded) ;; *) die "the system did not come up: '$state'" ;; esac
say "booted with systemd-nspawn: $state"

# ---- 1. start, ready, backups --------------------------------------------------
c "systemctl enable --now stagedoor" >"$work/start.log" 2>&1 ||
	die "systemctl enable --now stagedoor failed: $(cat "$work/start.log")"
status=$(c "systemctl show -p StatusText --value stagedoor")
case $status in *"http ready"*) ;; *) die "STATUS= after start: '$status'" ;; esac
c "curl -fsS --max-time 10 http://127.0.0.1:$port/healthz" >/dev/null ||
	die "the box does not answer on 127.0.0.1:$port"
for i in $(seq 1 60); do
	ls "$root/var/backups/stagedoor" 2>/dev/null | grep -q '^stagedoor-' && break
	sleep 1
done
backup=$(ls "$root/var/backups/stagedoor" | grep '^stagedoor-' | head -n 1 || true)
[ -n "$backup" ] || die "no backup in /var/backups/stagedoor after 60 s"
c "journalctl -u stagedoor --no-pager" | grep -q 'Read-only file system' &&
	die "the journal says 'Read-only file system'"
say "active, STATUS='$status'; backup $backup in /var/backups/stagedoor"

# ---- 2. reload, logrotate ---------------------------------------------------------
c "systemctl reload stagedoor" >"$work/reload.log" 2>&1 ||
	die "systemctl reload stagedoor failed: $(cat "$work/reload.log")"
c "systemctl is-active stagedoor" >/dev/null || die "not active after reload"
log=$root/var/log/stagedoor/stagedoor.log
for i in $(seq 1 50); do grep -q 'msg="configuration reloaded"' "$log" && break; sleep 0.2; done
grep -q 'msg="configuration reloaded"' "$log" || die "no 'configuration reloaded' in $log"
c "logrotate -f /etc/logrotate.d/stagedoor" >"$work/logrotate.log" 2>&1 ||
	die "logrotate failed: $(cat "$work/logrotate.log")"
[ -f "$log.1" ] || die "logrotate made no stagedoor.log.1"
c "systemctl reload stagedoor" >/dev/null 2>&1 || die "the second reload failed"
for i in $(seq 1 50); do grep -q 'msg="configuration reloaded"' "$log" 2>/dev/null && break; sleep 0.2; done
grep -q 'msg="configuration reloaded"' "$log" 2>/dev/null ||
	die "after logrotate the box does not write to the new $log"
say "systemctl reload: ok; logrotate rotated the log and the box writes to the new one"

# ---- 3. a port taken: the start fails fast, named, not restarted -------------------
c "systemctl stop stagedoor" || die "systemctl stop failed"
c "systemd-run -q --unit=holder systemd-socket-activate -l 127.0.0.1:$port /bin/sleep 600" ||
	die "cannot start a process that holds the port"
sleep 1
t0=$(date +%s)
if c "timeout 120 systemctl start stagedoor" >"$work/taken.log" 2>&1; then
	die "systemctl start succeeded with 127.0.0.1:$port taken"
fi
took=$(($(date +%s) - t0))
[ "$took" -le 20 ] || die "systemctl start took $took s to fail"
sleep 3
show=$(c "systemctl show -p ExecMainStatus -p NRestarts -p ActiveState stagedoor" | tr '\n' ' ')
case $show in *"ExecMainStatus=78"*"NRestarts=0"*"ActiveState=failed"* | \
	*"NRestarts=0"*"ExecMainStatus=78"*) ;;
*) die "after the failed start: $show" ;;
esac
c "journalctl -u stagedoor --no-pager" |
	grep -q "cannot listen on 127.0.0.1:$port: Address already in use" ||
	die "the journal does not name 127.0.0.1:$port and the reason"
st=$(c "systemctl status --no-pager stagedoor" 2>&1 | grep -c "cannot listen on 127.0.0.1:$port" || true)
[ "$st" -ge 1 ] || die "systemctl status does not show why it failed"
say "port taken: systemctl start failed in $took s, status 78, not restarted; systemctl status and the journal name 127.0.0.1:$port"
say "status text: '$(c "systemctl show -p StatusText --value stagedoor")'"

c "systemctl stop holder" >/dev/null 2>&1 || true

# ---- 4. a wrong timezone: refused at once, not restarted; the right one in force ------
c "systemctl reset-failed stagedoor" >/dev/null 2>&1 || true
sed -i 's|^# timezone = Europe/Berlin |timezone = Mars/Olympus |' "$conf"
grep -q '^timezone = Mars/Olympus' "$conf" || die "the shipped stagedoor.conf has no timezone example line"
if c "timeout 120 systemctl start stagedoor" >"$work/zone.log" 2>&1; then
	die "systemctl start succeeded with timezone = Mars/Olympus"
fi
sleep 3
show=$(c "systemctl show -p ExecMainStatus -p NRestarts stagedoor" | tr '\n' ' ')
case $show in *"ExecMainStatus=78"*"NRestarts=0"* | *"NRestarts=0"*"ExecMainStatus=78"*) ;;
*) die "after a start with a wrong timezone: $show" ;;
esac
c "journalctl -u stagedoor --no-pager" | grep -q "Mars/Olympus" ||
	die "the journal does not name the wrong timezone"
sed -i 's|^timezone = Mars/Olympus |timezone = Europe/Berlin |' "$conf"
c "systemctl reset-failed stagedoor" >/dev/null 2>&1 || true
c "timeout 120 systemctl start stagedoor" >"$work/zone2.log" 2>&1 ||
	die "systemctl start with timezone = Europe/Berlin failed: $(cat "$work/zone2.log")"
zone=$(c "curl -fsS --max-time 10 -H \"Authorization: Bearer \$(cat /var/lib/stagedoor/api.token)\" \
	http://127.0.0.1:$port/v1/whoami" || true)
case $zone in *'"timezone":"Europe/Berlin"'*'"3600":"CET"'* | *'"3600":"CET"'*'"timezone":"Europe/Berlin"'*) ;;
*) die "whoami under the unit with timezone = Europe/Berlin: '$zone'" ;;
esac
say "timezone: a wrong one failed the start with status 78, not restarted, named in the journal; Europe/Berlin in force"

c "systemctl poweroff" >/dev/null 2>&1 || true
for i in $(seq 1 100); do kill -0 "$leader" 2>/dev/null || break; sleep 0.2; done
say "ok"
