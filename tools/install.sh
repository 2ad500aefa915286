#!/bin/sh
# install.sh install|uninstall --prefix P [--destdir D] [--sysconfdir E]
#            [--bin BINARY --man1 FILE --man5 FILE --completion FILE]
#
# `make install` and `make uninstall`, for a box without the Debian package.
# One list of files serves both, so uninstall removes exactly what install
# put (under DESTDIR, when given, as packagers stage a tree):
#
#   P/bin/stagedoor                                  the binary (0755)
#   P/share/man/man1/stagedoor.1                     stagedoor(1)
#   P/share/man/man5/stagedoor.conf.5                stagedoor.conf(5)
#   P/share/bash-completion/completions/stagedoor    bash completion
#   P/lib/systemd/system/stagedoor.service           the unit, ExecStart=P/bin/stagedoor
#                                                    (systemd reads /usr/lib and
#                                                    /usr/local/lib; elsewhere copy it
#                                                    to /etc/systemd/system)
#   P/share/doc/stagedoor/examples/stagedoor.conf    the commented default configuration
#   P/share/doc/stagedoor/examples/sqs_worker.*       queues.md's example workers
#   P/share/doc/stagedoor/*.md                        the manual (dist/doc)
#   E/stagedoor/stagedoor.conf                       the same, only where no file is
#                                                    (E: /etc); an existing one is kept
#
# uninstall removes E/stagedoor/stagedoor.conf only while it is still the
# example, byte for byte: a file someone edited (or had before install) stays,
# and says so.  Nothing here makes the stagedoor user or /var/lib/stagedoor:
# the unit wants the user (adduser --system --group --home /var/lib/stagedoor
# --no-create-home stagedoor), and its StateDirectory= makes the folder.
set -eu

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: %s\n' "$*" >&2; exit 2; }
usage() {
	die "usage: tools/install.sh install|uninstall --prefix P [--destdir D] [--sysconfdir E] [--bin B --man1 F --man5 F --completion F]"
}

[ "$#" -ge 1 ] || usage
mode=$1
shift
case $mode in install | uninstall) ;; *) usage ;; esac
prefix=""
destdir=""
sysconfdir=/etc
bin=""
man1=""
man5=""
completion=""
while [ "$#" -gt 0 ]; do
	[ "$#" -ge 2 ] || usage
	case $1 in
	--prefix) prefix=$2 ;;
	--destdir) destdir=$2 ;;
	--sysconfdir) sysconfdir=$2 ;;
	--bin) bin=$2 ;;
	--man1) man1=$2 ;;
	--man5) man5=$2 ;;
	--completion) completion=$2 ;;
	*) usage ;;
	esac
	shift 2
done
# PREFIX and SYSCONFDIR are where the files live when the box runs: the
# unit's ExecStart names the binary by them, so they must be absolute
case $prefix in
/*) ;;
*) die "PREFIX must be an absolute path (e.g. /usr/local), not '$prefix'" ;;
esac
case $sysconfdir in
/*) ;;
*) die "SYSCONFDIR must be an absolute path (e.g. /etc), not '$sysconfdir'" ;;
esac
case $prefix$sysconfdir in
*[!A-Za-z0-9/._+-]*) die "PREFIX and SYSCONFDIR may hold only letters, digits and / . _ + -" ;;
esac
case $destdir in
*[[:space:]]*) die "DESTDIR may not hold spaces" ;;
esac
prefix=${prefix%/}
src=$(cd "$(dirname "$0")/.." && pwd)

d=$destdir$prefix
conf=$destdir$sysconfdir/stagedoor/stagedoor.conf
example=$d/share/doc/stagedoor/examples/stagedoor.conf
# the list, as SOURCE MODE DEST; the unit is made from dist/, not copied
# (uninstall reads only DEST: "-" stands in for sources it was not given)
files="${bin:--} 0755 $d/bin/stagedoor
${man1:--} 0644 $d/share/man/man1/stagedoor.1
${man5:--} 0644 $d/share/man/man5/stagedoor.conf.5
${completion:--} 0644 $d/share/bash-completion/completions/stagedoor
- 0644 $d/lib/systemd/system/stagedoor.service
$src/dist/stagedoor.conf 0644 $example
$src/dist/doc/api.md 0644 $d/share/doc/stagedoor/api.md
$src/dist/doc/design.md 0644 $d/share/doc/stagedoor/design.md
$src/dist/doc/jobs.md 0644 $d/share/doc/stagedoor/jobs.md
$src/dist/doc/postgresql.md 0644 $d/share/doc/stagedoor/postgresql.md
$src/dist/doc/queues.md 0644 $d/share/doc/stagedoor/queues.md
$src/dist/doc/examples/sqs_worker.py 0644 $d/share/doc/stagedoor/examples/sqs_worker.py
$src/dist/doc/examples/sqs_worker.mjs 0644 $d/share/doc/stagedoor/examples/sqs_worker.mjs
$src/dist/doc/running.md 0644 $d/share/doc/stagedoor/running.md
$src/dist/doc/testing.md 0644 $d/share/doc/stagedoor/testing.md
$src/dist/doc/tour.md 0644 $d/share/doc/stagedoor/tour.md"

if [ "$mode" = install ]; then
	[ -n "$bin" ] && [ -n "$man1" ] && [ -n "$man5" ] && [ -n "$completion" ] ||
		die "install needs --bin, --man1, --man5 and --completion"
	for f in "$bin" "$man1" "$man5" "$completion" "$src"; do
		case $f in *[[:space:]]*) die "'$f': paths with spaces are not supported" ;; esac
	done
	for f in "$bin" "$man1" "$man5" "$completion"; do
		[ -s "$f" ] || die "$f: no such file, or empty"
	done
	printf '%s\n' "$files" | while read -r from m to; do
		mkdir -p "$(dirname "$to")"
		if [ "${to##*/}" = stagedoor.service ]; then
			sed "s|/usr/local/bin/stagedoor|$prefix/bin/stagedoor|g" \
				"$src/dist/stagedoor.service" >"$to.tmp"
			chmod "$m" "$to.tmp"
			mv "$to.tmp" "$to"
		else
			install -m "$m" "$from" "$to"
		fi
		say "$to"
	done
	if [ -e "$conf" ]; then
		say "$conf exists: kept (the example is $example)"
	else
		install -D -m 0644 "$src/dist/stagedoor.conf" "$conf"
		say "$conf"
	fi
	exit 0
fi

# uninstall: the configuration first, while the example is there to compare
if [ -f "$conf" ]; then
	if [ -f "$example" ] && cmp -s "$conf" "$example"; then
		rm -f "$conf"
		say "removed $conf"
	else
		say "$conf differs from the example: kept"
	fi
fi
rmdir "$destdir$sysconfdir/stagedoor" 2>/dev/null || true
printf '%s\n' "$files" | while read -r from m to; do
	if [ -e "$to" ] || [ -L "$to" ]; then
		rm -f "$to"
		say "removed $to"
	fi
done
# the folders that are the box's own, when nothing else is in them
rmdir "$d/share/doc/stagedoor/examples" "$d/share/doc/stagedoor" 2>/dev/null || true
exit 0
