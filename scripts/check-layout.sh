#!/usr/bin/env bash
# Checks that the README's "Layout" table names every non-test Go file of the
# root package and every top-level directory, so that the table stays true to
# `ls`. Prints each one missing and fails if any is.
set -euo pipefail
cd "$(dirname "$0")/.."

# The table: the rows of the "## Layout" section, up to the next heading.
table=$(awk '/^## Layout/ {on = 1; next} /^#/ {on = 0} on && /^\|/' README.md)
if [ -z "$table" ]; then
	echo "README.md has no Layout table"
	exit 1
fi

missing=0
check() { # $1: what the table must hold, $2: the name to report
	if ! grep -qF "$1" <<<"$table"; then
		echo "README.md's Layout table does not mention $2"
		missing=1
	fi
}
for f in *.go; do
	case $f in *_test.go) continue ;; esac
	check "\`$f\`" "$f"
done
for d in */; do
	check "\`$d" "$d" # the directory or a path inside it
done
exit "$missing"
