#!/usr/bin/env bash
# Checks that the README's "Layout" table names every non-test Go file of the
# root package and every top-level directory, so that the table stays true to
# `ls`, that every relative link and cited anchor of the docs resolves, and
# that git tracks no build output.
# Prints each one missing and fails if any is.
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

# Links: every relative link of the Markdown files, and every anchor of a
# Markdown file of docs/ cited anywhere (code comments cite the rules of
# docs/DESIGN.md by their anchors), leads to a file that exists and, with
# an anchor, to one of its headings, as GitHub makes their anchors: lower
# case, punctuation dropped, spaces as hyphens, "-1" and so on after a
# repeat. Letters beyond ASCII (µ, é) stay, as on GitHub; the punctuation
# and symbols beyond ASCII that the docs may use (dashes, quotes, ×, ≤) go. Code is no link: fenced blocks (``` or ~~~, indented too, as in a
# list item) and inline code spans are skipped.
declare -A anchors=()
# fences: the awk rule that keeps in fence the marker of the fenced block a
# line is in ("" outside one) and skips the marker lines.
fences='match($0, /^ *(```|~~~)/) { m = substr($0, RSTART + RLENGTH - 3, 3)
	if (fence == "") fence = m; else if (m == fence) fence = ""
	next }'
anchors_of() { # $1: a Markdown file; sets anchors[$1] to " a1 a2 ... "
	[[ -v anchors[$1] ]] && return
	anchors[$1]=" $(awk "$fences"'
		fence == "" && /^#+ / {
			h = $0; sub(/^#+ +/, "", h); sub(/ +#* *$/, "", h)
			gsub(/\]\([^)]*\)/, "", h); h = tolower(h)
			gsub(/[^a-z0-9 _\200-\377-]/, "", h)
			gsub(/—|–|…|‘|’|“|”|×|≤|≥|→|←|·|±|°/, "", h); gsub(/ /, "-", h)
			a = h; if (seen[h]++) a = h "-" (seen[h] - 1)
			printf "%s ", a
		}' "$1")"
}
link() { # $1: where the link is, $2: the file it names, $3: its anchor or ""
	if [ ! -e "$2" ]; then
		echo "$1: links to $2, which does not exist"
		missing=1
	elif [ -n "$3" ]; then
		anchors_of "$2"
		if [[ ${anchors[$2]} != *" $3 "* ]]; then
			echo "$1: links to $2#$3, which is no heading of it"
			missing=1
		fi
	fi
}
mapfile -t mdfiles < <(find . -name '*.md' -not -path './.git/*' -not -path '*/node_modules/*' | sed 's|^\./||')
while IFS=$'\t' read -r where file target; do
	path=${target%%#*} frag=
	[[ $target == *"#"* ]] && frag=${target#*#}
	if [ -z "$path" ]; then path=$file; elif [[ $file == */* ]]; then path=${file%/*}/$path; fi
	parts=() # the path from the root, without . and ..
	IFS=/ read -ra segs <<<"$path"
	for s in "${segs[@]}"; do
		case $s in
		. | "") ;;
		..) [ ${#parts[@]} -gt 0 ] && unset 'parts[-1]' ;;
		*) parts+=("$s") ;;
		esac
	done
	printf -v path '%s/' "${parts[@]}"
	path=${path%/}
	link "$where" "${path:-.}" "$frag" # "": the root, as in [README](..)
done < <(awk 'FNR == 1 { fence = "" } '"$fences"'
	fence == "" { line = $0; gsub(/`[^`]*`/, "", line)
		while (match(line, /\]\([^) ]+\)/)) {
			t = substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, RSTART + RLENGTH)
			if (t !~ /^[a-z]+:/) printf "%s:%d\t%s\t%s\n", FILENAME, FNR, FILENAME, t
		}
	}' "${mdfiles[@]}")
while IFS=: read -r file line cited; do
	link "$file:$line" "${cited%%#*}" "${cited#*#}"
done < <(grep -rnoE --exclude-dir=.git --exclude-dir=node_modules 'docs/[A-Za-z_]+\.md#[A-Za-z0-9_-]+' . | sed 's|^\./||')

# Build output is no source: no file the repository tracks weighs over 1 MiB
# (the largest source is some 50 KB; a built gateway, 26 MB, was once
# committed by mistake).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	while read -r size file; do
		echo "$file: $size bytes, tracked by git: a build output? (.gitignore it)"
		missing=1
	done < <(git ls-files -z | xargs -0 stat -c '%s %n' 2>/dev/null | awk '$1 > 1048576')
fi
exit "$missing"
