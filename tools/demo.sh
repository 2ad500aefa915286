#!/bin/sh
# demo.sh STAGEDOOR: a short run of the queue on its built-in job kinds, on a
# fresh database under var/demo/.
set -eu
S=$1
DB=var/demo/stagedoor.db
export STAGEDOOR_DB=$DB
rm -rf var/demo
step() { printf '\n== %s\n' "$*"; }

step "init $DB"
$S init

step "enqueue: 40 noop, 6 sleep (300 ms), one that fails twice, one delayed 1.5 s, one urgent, one unknown kind"
i=0
while [ $i -lt 40 ]; do $S enqueue noop "{\"n\":$i}" >/dev/null; i=$((i + 1)); done
i=0
while [ $i -lt 6 ]; do $S enqueue sleep '{"ms":300}' >/dev/null; i=$((i + 1)); done
echo "fail x2:  $($S enqueue fail '{"times":2}' --job-id demo-flaky)"
echo "delayed:  $($S enqueue noop '{}' --delay-ms 1500 --job-id demo-later)"
echo "urgent:   $($S enqueue noop '{}' --priority -10 --job-id demo-urgent)"
echo "unknown:  $($S enqueue nosuchkind '{}' --job-id demo-unknown)"
$S jobs stats

step "two worker processes share the stream and exit when it is empty (--drain)"
STAGEDOOR_LOG_LEVEL=warn $S worker --drain --name worker-a --concurrency 4 &
a=$!
STAGEDOOR_LOG_LEVEL=warn $S worker --drain --name worker-b --concurrency 4 &
b=$!
wait $a
wait $b
$S jobs stats

step "dead letters (an unknown kind is a permanent failure)"
$S jobs dead

step "the flaky job: three deliveries, two failed attempts, then done"
$S jobs ls --state done --kind fail

step "bad input is refused and writes nothing"
$S enqueue noop '{not json' || true
$S enqueue noop '{}' --delay-ms soon || true

printf '\nThe database is %s; try: STAGEDOOR_DB=%s %s jobs ls --state done\n' "$DB" "$DB" "$S"
