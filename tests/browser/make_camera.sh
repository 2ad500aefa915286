#!/bin/sh
# make_camera.sh PDF OUT.y4m [WIDTHxHEIGHT]: a fake camera for chromium
# (--use-file-for-fake-video-capture=OUT.y4m) that shows the first page of a
# ticket PDF, as a phone held up to it would.  pdftoppm (poppler-utils)
# renders the page straight at the size it is shown at (its long side the
# frame's height: the QR code gets whole pixels per module, no second
# scaling), ffmpeg pads it to the frame on white and writes a short Y4M
# (uncompressed, what chromium's fake capture reads) that chromium loops.
# Default size 640x480: the QR code of a stagedoor ticket is then about
# 160 px across, 5 px a module.
set -eu
[ $# -ge 2 ] || { echo "usage: make_camera.sh PDF OUT.y4m [WIDTHxHEIGHT]" >&2; exit 2; }
pdf=$1 out=$2 size=${3:-640x480}
w=${size%x*} h=${size#*x}
for tool in pdftoppm ffmpeg; do
	command -v $tool >/dev/null 2>&1 || {
		echo "make_camera: $tool is missing (Debian: poppler-utils, ffmpeg; make deps-test)" >&2
		exit 1
	}
done
[ -r "$pdf" ] || { echo "make_camera: cannot read $pdf" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
long=$h
[ "$w" -lt "$h" ] && long=$w
pdftoppm -f 1 -l 1 -singlefile -png -scale-to "$long" "$pdf" "$tmp/page"
ffmpeg -nostdin -loglevel error -y -loop 1 -i "$tmp/page.png" -t 2 -r 10 \
	-vf "pad=$w:$h:(ow-iw)/2:(oh-ih)/2:color=white,format=yuv420p" \
	-pix_fmt yuv420p -f yuv4mpegpipe "$out"
echo "make_camera: $out ($size, 2 s at 10 fps, looped by chromium) from page 1 of $pdf"
