#!/usr/bin/env bash
# The project's test command (README): the tests of every module of the
# workspace under the race detector. It installs and starts what the tests
# need, so it passes on a fresh machine with only Go and gcc.
set -euo pipefail
cd "$(dirname "$0")/.."
# redissync's tests run a real redis-server (Debian package redis-server).
if ! command -v redis-server >/dev/null && command -v apt-get >/dev/null; then
	apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
mapfile -t patterns < <(scripts/patterns.sh)
go test -race "$@" "${patterns[@]}"
