#!/usr/bin/env bash
# README command 1: install what is missing, build, run the demo (create a
# database, write experience while sampling, reopen it), then show the
# replaydb shell on the database it made.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/install-deps.sh
bash tools/scripts/build.sh release
dir="${1:-./replaydb-demo}"
./build/bin/replaydb demo "$dir"

echo
echo "=== the replaydb shell on $dir (interactive: ./build/bin/replaydb $dir)"
for command in "tables" "stats experience" "trajectories experience --limit 5" \
               "show experience 1 --steps 2" "sample experience 4 --column obs" \
               "priorities experience --bins 4" "wal" "verify"; do
  echo "replaydb> $command"
  ./build/bin/replaydb "$dir" -c "$command"
done
