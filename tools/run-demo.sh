#!/usr/bin/env bash
# README command 1: install what is missing, build, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh release
./build/bin/replaydb demo "${1:-./replaydb-demo}"
