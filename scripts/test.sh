#!/usr/bin/env bash
# The project's test command (README): the tests of every module of the
# workspace under the race detector. It installs and starts what the tests
# need, so it passes on a fresh machine with only Go and gcc.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t patterns < <(scripts/patterns.sh)
go test -race "$@" "${patterns[@]}"
