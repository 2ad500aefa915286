#!/bin/sh
# deb.sh --version V --bin BINARY --man1 stagedoor.1 --man5 stagedoor.conf.5
#        --completion BASH_COMPLETION [--out DIR]
#
# Builds DIR/stagedoor_V_ARCH.deb (default DIR: build) with dpkg-deb, as any
# user and with no network: the files are owned by root in the package
# (--root-owner-group) whoever builds it.  The binary, its version and the
# three generated documents are arguments, so that the same script packages
# this tree's build (make deb: the version from the VERSION file) and an
# older release's binary (make check-deb's upgrade test); everything else
# comes from this tree's dist/: the systemd unit, the default configuration,
# and dist/deb/ (maintainer scripts, sysusers.d, tmpfiles.d, logrotate,
# copyright, changelog).  The package is native: its version is the
# program's, with no Debian revision.
#
# Checks what a package must not get wrong: the unit's ExecStart is
# /usr/bin/stagedoor (a unit that still says /usr/local/bin is corrected),
# the configuration's active lines put db and state_dir in /var/lib/stagedoor,
# dist/deb/changelog has an entry for V (the package's changelog is that entry
# and the older ones).  Depends is what dpkg-shlibdeps finds the binary links
# with, plus adduser for the postinst.
#
# Prints the path of the .deb on stdout.  Needs dpkg-dev (dpkg-shlibdeps)
# and binutils (strip).
set -eu

say() { printf 'deb: %s\n' "$*" >&2; }
die() { printf 'deb: %s\n' "$*" >&2; exit 1; }
usage() {
	die "usage: tools/deb.sh --version V --bin BINARY --man1 FILE --man5 FILE --completion FILE [--out DIR]"
}

version=""
bin=""
man1=""
man5=""
completion=""
out=build
while [ "$#" -gt 0 ]; do
	[ "$#" -ge 2 ] || usage
	case $1 in
	--version) version=$2 ;;
	--bin) bin=$2 ;;
	--man1) man1=$2 ;;
	--man5) man5=$2 ;;
	--completion) completion=$2 ;;
	--out) out=$2 ;;
	*) usage ;;
	esac
	shift 2
done
[ -n "$version" ] && [ -n "$bin" ] && [ -n "$man1" ] && [ -n "$man5" ] && [ -n "$completion" ] ||
	usage
# Debian's version syntax, with no epoch and no revision: a native package
case $version in
[0-9]*) ;;
*) die "version '$version' must start with a digit (e.g. 0.2.0)" ;;
esac
case $version in
*[!0-9A-Za-z.+~]*) die "version '$version' may hold only digits, letters and . + ~" ;;
esac
for f in "$bin" "$man1" "$man5" "$completion"; do
	[ -f "$f" ] && [ -s "$f" ] || die "$f: no such file, or empty"
done
[ -x "$bin" ] || die "$bin: not executable"
for t in dpkg-deb dpkg-shlibdeps strip gzip md5sum; do
	command -v "$t" >/dev/null 2>&1 || die "$t not found (apt-get install dpkg-dev binutils)"
done

src=$(cd "$(dirname "$0")/.." && pwd)
dist=$src/dist
arch=$(dpkg --print-architecture)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$out/deb-$version
root=$work/root
deb=$out/stagedoor_${version}_$arch.deb
umask 022

# The binary names its own version (the VERSION file it was built with):
# a package must not say another.
binver=$("$bin" --version 2>/dev/null | awk 'NR == 1 { print $2 }') || binver=""
[ "$binver" = "$version" ] ||
	die "$bin says version '${binver:-?}', but the package would be $version: build it again"

rm -rf "$work"
mkdir -p "$root/DEBIAN"

# ---- the files ------------------------------------------------------------
put() { # put MODE SOURCE DEST: DEST inside the package
	install -D -m "$1" "$2" "$root$3"
}
put 0755 "$bin" /usr/bin/stagedoor
# Debian ships binaries stripped; the build's debug information stays in bin/
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/stagedoor"

mkdir -p "$root/usr/share/man/man1" "$root/usr/share/man/man5"
gzip -9n <"$man1" >"$root/usr/share/man/man1/stagedoor.1.gz"
gzip -9n <"$man5" >"$root/usr/share/man/man5/stagedoor.conf.5.gz"
put 0644 "$completion" /usr/share/bash-completion/completions/stagedoor

# The unit runs the packaged binary, whatever path dist/ gives for a make install
mkdir -p "$root/lib/systemd/system"
sed 's|/usr/local/bin/stagedoor|/usr/bin/stagedoor|g' "$dist/stagedoor.service" \
	>"$root/lib/systemd/system/stagedoor.service"
grep -q '^ExecStart=/usr/bin/stagedoor run' "$root/lib/systemd/system/stagedoor.service" ||
	die "dist/stagedoor.service: ExecStart does not run /usr/bin/stagedoor run"
put 0644 "$dist/deb/sysusers.conf" /usr/lib/sysusers.d/stagedoor.conf
put 0644 "$dist/deb/tmpfiles.conf" /usr/lib/tmpfiles.d/stagedoor.conf

# The default configuration: the package's folders in its active lines
put 0644 "$dist/stagedoor.conf" /etc/stagedoor/stagedoor.conf
for want in 'db = /var/lib/stagedoor/stagedoor.db' 'state_dir = /var/lib/stagedoor'; do
	grep -qx "$want" "$dist/stagedoor.conf" ||
		die "dist/stagedoor.conf: no active line '$want'"
done
put 0644 "$dist/deb/logrotate" /etc/logrotate.d/stagedoor

# /usr/share/doc: the copyright, and the changelog from version's entry down.
# The package is native (its version is the program's, with no Debian
# revision: upstream and packaging are one tree), so the changelog is
# changelog.gz, as policy 12.7 wants of a native package.
doc=$root/usr/share/doc/stagedoor
put 0644 "$dist/deb/copyright" /usr/share/doc/stagedoor/copyright
awk -v v="$version" '
	/^stagedoor \(/ { if (index($0, "stagedoor (" v ")") == 1) found = 1 }
	found { print }
	END { exit found ? 0 : 1 }' "$dist/deb/changelog" >"$work/changelog" ||
	die "dist/deb/changelog has no entry 'stagedoor ($version)': add one"
gzip -9n <"$work/changelog" >"$doc/changelog.gz"
# The manual (dist/doc), each page over 4 kB compressed as policy 12.3 asks
for f in "$dist"/doc/*.md; do
	name=$(basename "$f")
	if [ "$(wc -c <"$f")" -gt 4096 ]; then
		gzip -9n <"$f" >"$doc/$name.gz"
		chmod 0644 "$doc/$name.gz"
	else
		put 0644 "$f" "/usr/share/doc/stagedoor/$name"
	fi
done

# ---- DEBIAN/ --------------------------------------------------------------
for s in postinst prerm postrm; do
	install -m 0755 "$dist/deb/$s" "$root/DEBIAN/$s"
done
(cd "$root" && find etc -type f | sort | sed 's|^|/|') >"$root/DEBIAN/conffiles"

# Depends: the libraries' packages, as dpkg-shlibdeps finds them from the
# binary's NEEDED entries; it wants a debian/control beside it.
mkdir -p "$work/shlibs/debian"
printf 'Source: stagedoor\n\nPackage: stagedoor\nArchitecture: any\n' \
	>"$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/stagedoor" 2>"$work/shlibdeps.log") ||
	{ cat "$work/shlibdeps.log" >&2; die "dpkg-shlibdeps failed"; }
depends=${shlibs#shlibs:Depends=}
[ -n "$depends" ] && [ "$depends" != "$shlibs" ] || die "dpkg-shlibdeps printed no Depends"

# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up,
# and one per folder or link
size=$(cd "$root" && find . -path ./DEBIAN -prune -o \( -type f -printf '%s\n' \) -o -printf '1024\n' |
	awk '{ s += int(($1 + 1023) / 1024) } END { print s }')

cat >"$root/DEBIAN/control" <<EOF
Package: stagedoor
Version: $version
Architecture: $arch
Maintainer: Stagedoor Box <dev@stagedoor.invalid>
Installed-Size: $size
Depends: $depends, adduser, tzdata
Section: misc
Priority: optional
Description: ticket seller's background jobs on SQLite or PostgreSQL
 Stagedoor Box takes ticket orders over HTTP or its command line and runs
 the jobs that follow each one (render the tickets PDF, email it, count the
 sale) from a durable job stream in one SQLite database, or PostgreSQL, with
 at-least-once delivery and handlers that make a second run harmless.
 .
 It serves a dashboard, a box office and a door page that scans tickets.
 The package installs the stagedoor user, /var/lib/stagedoor and a systemd
 unit that it does not start: systemctl enable --now stagedoor.
EOF

(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
	xargs md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

# Every file dated by the changelog's entry, so that the same inputs make
# the same package
epoch=$(sed -n 's/^ -- .*>  //p' "$work/changelog" | head -n 1)
epoch=$(date -d "$epoch" +%s) || die "dist/deb/changelog: unreadable date in the $version entry"
find "$root" -exec touch -h -d "@$epoch" {} +

rm -f "$deb"
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
say "built $deb"
printf '%s\n' "$deb"
