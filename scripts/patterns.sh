#!/usr/bin/env bash
# Prints one package pattern per module of the workspace (go.work), relative
# to the repository root: `go test ./...` alone does not enter nested modules.
set -euo pipefail
cd "$(dirname "$0")/.."
go list -m -f '{{.Dir}}' | while read -r dir; do
	echo ".${dir#"$PWD"}/..."
done
