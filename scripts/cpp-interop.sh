#!/usr/bin/env bash
# Interop check of the C interface (package cabi) with the FutoIn C++
# reference implementation, run by hand (CI cannot fetch the RI):
#
#   scripts/cpp-interop.sh CORE_CPP_API_DIR CORE_CPP_RI_DIR
#
# The arguments are local checkouts of github.com/futoin/core-cpp-api
# (tag v0.3.2) and github.com/futoin/core-cpp-ri-asyncsteps (tag v1.4.3),
# the last Apache-2.0 releases. Needs cmake, g++ and Debian's Boost
# (apt-get install cmake libboost-dev libboost-test-dev). Everything is
# built in a temporary directory (KEEP=1 keeps it); no file of the RI is
# copied into this repository.
#
# Three groups of cases, each case in a process of its own (a crash fails
# that case only), one line per case, then the counts:
#   cpp-steps    C++ steps (cabi/interop/cpp_steps.cpp) driving our root,
#                and the same on the RI's own root for comparison;
#   go-in-cpp    our Go steps (cabi.Wrap, cabi/interop/golib) in a flow of
#                the RI's root;
#   binarysteps  the RI's own tests/binarysteps.test.cpp on our root (a
#                copy in which ri::AsyncSteps is replaced by interop::Root,
#                cabi/interop/our_root.hpp, and each wait for the "done"
#                promise is followed by interop::settle(), a wait until the
#                flow has ended), and unchanged on the RI's root.
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 CORE_CPP_API_DIR CORE_CPP_RI_DIR" >&2
	exit 2
fi
api=$(cd "$1" && pwd)
ri=$(cd "$2" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
interop=$repo/cabi/interop

work=$(mktemp -d "${TMPDIR:-/tmp}/cpp-interop.XXXXXX")
if [ "${KEEP:-}" = 1 ]; then
	echo "work directory: $work"
else
	trap 'rm -rf "$work"' EXIT
fi
log=$work/build.log
fail_build() {
	echo "build failed; last lines of $log:" >&2
	tail -30 "$log" >&2
	exit 1
}

echo "== building the RI (cmake, -DHUNTER_ENABLED=OFF)"
# Side by side: the RI's CMakeLists adds ../core-cpp-api.
mkdir -p "$work/src"
mkdir -p "$work/src/core-cpp-api" "$work/src/core-cpp-ri-asyncsteps"
tar -C "$api" --exclude=.git -cf - . | tar -C "$work/src/core-cpp-api" -xf -
tar -C "$ri" --exclude=.git -cf - . | tar -C "$work/src/core-cpp-ri-asyncsteps" -xf -
cmake -S "$work/src/core-cpp-ri-asyncsteps" -B "$work/build" \
	-DHUNTER_ENABLED=OFF -DFUTOIN_WITH_TESTS=OFF -DCMAKE_BUILD_TYPE=Debug >>"$log" 2>&1 || fail_build
cmake --build "$work/build" -j2 >>"$log" 2>&1 || fail_build

echo "== building ours (go build -buildmode=c-shared)"
(cd "$repo" &&
	go build -buildmode=c-shared -o "$work/ours/libfutoin_asyncsteps.so" ./cabi/lib &&
	go build -buildmode=c-shared -o "$work/golib/libinterop_go.so" ./cabi/interop/golib) >>"$log" 2>&1 || fail_build

echo "== building the interop programs"
cxx=(g++ -std=c++14 -g -pthread -I"$work/src/core-cpp-api/include" -I"$work/src/core-cpp-ri-asyncsteps/include")
rilibs=("$work/build/libfutoin_asyncsteps.a" "$work/build/futoin_api/libfutoin_api.a")
ours=(-L"$work/ours" -lfutoin_asyncsteps -Wl,-rpath,"$work/ours")
boost=(-DBOOST_TEST_DYN_LINK -lboost_unit_test_framework)
tests=$work/src/core-cpp-ri-asyncsteps/tests
mkdir -p "$work/bin" "$work/bs"
"${cxx[@]}" -o "$work/bin/cpp_steps" "$interop/cpp_steps.cpp" "${rilibs[@]}" "${ours[@]}" >>"$log" 2>&1 || fail_build
"${cxx[@]}" -o "$work/bin/go_in_cpp" "$interop/go_in_cpp.cpp" "${rilibs[@]}" \
	-L"$work/golib" -linterop_go -Wl,-rpath,"$work/golib" >>"$log" 2>&1 || fail_build
cp "$tests/binarysteps.test.cpp" "$tests/main.test.cpp" "$work/bs/"
# The tests' roots become ours. The tests set "done" in a flow's last step
# and then read its state from their own thread; our stateVariable gives
# NULL to another thread while the flow runs, so they first wait for the
# flow to end (see settle in our_root.hpp).
sed -e 's/\bri::AsyncSteps\b/interop::Root/g' \
	-e 's/\bdone\.get_future()\.wait();/& interop::settle();/' \
	"$work/bs/binarysteps.test.cpp" >"$work/bs/binarysteps_ours.test.cpp"
"${cxx[@]}" -o "$work/bin/bs_ri" "$work/bs/main.test.cpp" "$work/bs/binarysteps.test.cpp" \
	"${rilibs[@]}" "${boost[@]}" >>"$log" 2>&1 || fail_build
"${cxx[@]}" -include "$interop/our_root.hpp" -o "$work/bin/bs_ours" "$work/bs/main.test.cpp" \
	"$work/bs/binarysteps_ours.test.cpp" "${rilibs[@]}" "${ours[@]}" "${boost[@]}" >>"$log" 2>&1 || fail_build

# result RUN...: runs one case with a time limit; prints PASS, or FAIL and
# the first line that says why.
result() {
	local out rc
	out=$(timeout 60 "$@" 2>&1) && rc=0 || rc=$?
	if [ $rc -eq 0 ]; then
		echo PASS
		return
	fi
	local why
	why=$(printf '%s\n' "$out" | grep -m1 -E 'FAIL |error|FATAL|Sanitizer|exception' || true)
	case $rc in
	124) why="timeout; $why" ;;
	13[0-9]) why="crash (signal $((rc - 128))); $why" ;;
	esac
	echo "FAIL ${why#FAIL }"
}

total=0
passed=0
ri_passed=0
ri_only=0 # cases that pass on the RI's root and fail on ours
group() { # NAME: resets the counts of a group
	gname=$1 gtotal=0 gpassed=0 gri=0 gri_only=0
	echo
	echo "== $gname"
}
record() { # CASE OURS [RI]
	local c=$1 o=$2 r=${3:-}
	gtotal=$((gtotal + 1))
	[ "${o%% *}" = PASS ] && gpassed=$((gpassed + 1))
	if [ -n "$r" ]; then
		[ "${r%% *}" = PASS ] && gri=$((gri + 1))
		[ "${r%% *}" = PASS ] && [ "${o%% *}" != PASS ] && gri_only=$((gri_only + 1))
		printf '%-4s %s/%s (RI root: %s)%s\n' "${o%% *}" "$gname" "$c" "${r%% *}" "$(reason "$o")"
	else
		printf '%-4s %s/%s%s\n' "${o%% *}" "$gname" "$c" "$(reason "$o")"
	fi
}
reason() { [ "${1%% *}" = PASS ] || echo ": ${1#FAIL }"; }
summary() { # HAS_RI
	total=$((total + gtotal))
	passed=$((passed + gpassed))
	ri_passed=$((ri_passed + gri))
	ri_only=$((ri_only + gri_only))
	if [ "$1" = 1 ]; then
		echo "$gname: $gpassed of $gtotal pass on our root; $gri on the RI's root; $gri_only pass on the RI's root only"
	else
		echo "$gname: $gpassed of $gtotal pass"
	fi
}

group cpp-steps
for c in $("$work/bin/cpp_steps" list); do
	record "$c" "$(result "$work/bin/cpp_steps" ours "$c")" "$(result "$work/bin/cpp_steps" ri "$c")"
done
summary 1

group go-in-cpp
for c in $("$work/bin/go_in_cpp" list); do
	record "$c" "$(result "$work/bin/go_in_cpp" "$c")"
done
summary 0

group binarysteps
# Suites and cases in the order of the source.
mapfile -t bs_cases < <(awk '
	function name(s) { sub(/^[^(]*\(/, "", s); sub(/\).*$/, "", s); return s }
	/^BOOST_AUTO_TEST_SUITE_END/ { n--; next }
	/^BOOST_AUTO_TEST_SUITE\(/ { stack[++n] = name($0) }
	/^BOOST_AUTO_TEST_CASE\(/ { p = ""; for (i = 1; i <= n; i++) p = p stack[i] "/"; print p name($0) }
' "$work/bs/binarysteps.test.cpp")
for c in "${bs_cases[@]}"; do
	record "${c#binarysteps/}" "$(result "$work/bin/bs_ours" --run_test="$c" --log_level=error)" \
		"$(result "$work/bin/bs_ri" --run_test="$c" --log_level=error)"
done
summary 1

echo
echo "total: $passed of $total cases pass on our root; $ri_only pass on the RI's root and fail on ours"
