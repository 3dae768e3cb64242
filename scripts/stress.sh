#!/usr/bin/env bash
# Runs a package's tests N times while a CPU hog keeps every core busy, and reports each failed
# test by name: a timing flake shows here, on a loaded machine, rather than in CI.
#
#   scripts/stress.sh [-n N] [-run REGEX] [-norace] PKG...
#   make stress PKG=./internal/dispatch N=5 [RUN=TestGate]
#   make stress-all N=3        the packages that hold real processes
#
# Each run is a fresh `go test -count=1` process (-race unless -norace, as CI runs it), so a
# failure in one run does not leak state into the next. The hog is one busy loop per core at
# the lowest priority (nice 19): the tests still get the CPU, as late as on a loaded CI machine.
# A failed test is fixed, never retried: nothing here or in CI re-runs a failure to pass.
# HOG=0 runs without the hog; HOG=N runs N busy loops. P=N runs N packages at once (5).
set -euo pipefail
cd "$(dirname "$0")/.."

# The race flags are the Makefile's RACE and TRIM (docs/adr/0004-race-detector-scope.md).
n=5 run=""
race=(-race -gcflags=all=-dwarf=false "-gcflags=modernc.org/...=-race=false -dwarf=false" -ldflags=-w -trimpath)
pkgs=()
while [ $# -gt 0 ]; do
  case "$1" in
  -n) n=$2; shift 2 ;;
  -run) run=$2; shift 2 ;;
  -norace) race=(-trimpath); shift ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "stress: unknown flag $1 (see --help)" >&2; exit 2 ;;
  *) pkgs+=("$1"); shift ;;
  esac
done
if [ ${#pkgs[@]} -eq 0 ]; then
  echo "stress: name the packages to stress, e.g. scripts/stress.sh -n 5 ./internal/dispatch" >&2
  exit 2
fi
case "$n" in ''|*[!0-9]*|0) echo "stress: -n wants a positive count, got '$n'" >&2; exit 2 ;; esac

hogs=${HOG:-$(nproc)}
work=$(mktemp -d)
hog_pids=()
cleanup() {
  for p in "${hog_pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
for _ in $(seq 1 "$hogs"); do
  nice -n 19 sh -c 'while :; do :; done' &
  hog_pids+=($!)
done
echo "== stress: ${pkgs[*]}, $n runs, ${race[*]}, $hogs busy loops beside them"

# Build once, before the clock starts: the runs then measure the tests, not the compiler.
CGO_ENABLED=1 go test "${race[@]}" -count=1 -run '^$' "${pkgs[@]}" >/dev/null

# Five packages at a time, as make unit runs them (UNIT_P): a package's tests see the load of
# the others beside them, as in CI. P=2 for go test's default on two cores.
args=(-count=1 -timeout 40m -json -p "${P:-5}")
export GOGC=${GOGC:-400}   # the Makefile's TEST_GOGC
args+=("${race[@]}")
[ -n "$run" ] && args+=(-run "$run")
failed_runs=0
start=$SECONDS
for i in $(seq 1 "$n"); do
  s=$SECONDS
  out="$work/run$i.json"
  if CGO_ENABLED=1 go test "${args[@]}" "${pkgs[@]}" >"$out" 2>"$work/run$i.err"; then
    echo "== stress: run $i/$n passed in $((SECONDS - s)) s"
  else
    failed_runs=$((failed_runs + 1))
    echo "== stress: run $i/$n FAILED in $((SECONDS - s)) s:"
    # A failed test: {"Action":"fail","Package":"P","Test":"T",...}; a package that failed
    # outside any test (a build error, a panic in TestMain, a timeout) has no Test.
    grep '"Action":"fail"' "$out" | sed -n 's/.*"Package":"\([^"]*\)".*"Test":"\([^"]*\)".*/\1 \2/p' |
      sort -u | tee -a "$work/failures" | sed 's/^/     /'
    # What each failed test said (its last 30 lines), and the run's whole go test -json kept.
    kept="${TMPDIR:-/tmp}/stress-$$-run$i.json"
    cp "$out" "$kept"
    grep '"Action":"fail"' "$out" | sed -n 's/.*"Package":"\([^"]*\)".*"Test":"\([^"]*\)".*/\1 \2/p' | sort -u |
      while read -r p tst; do
        echo "     --- $tst ($p):"
        grep -F "\"Package\":\"$p\"" "$out" | grep -F "\"Test\":\"$tst\"" | grep '"Action":"output"' |
          sed -n 's/.*"Output":"\(.*\)"}$/\1/p' | sed 's/\\n$//; s/\\t/  /g' | tail -n 30 | sed 's/^/       /'
      done
    echo "     (the run's go test -json: $kept)"
    if ! grep '"Action":"fail"' "$out" | grep -q '"Test":'; then
      echo "     (a package failed outside its tests; its output:)"
      tail -n 20 "$work/run$i.err" | sed 's/^/     /'
      grep '"Action":"output"' "$out" | tail -n 20 | sed -n 's/.*"Output":"\(.*\)".*/\1/p' | sed 's/^/     /'
    fi
  fi
done

echo "== stress: $((n - failed_runs))/$n runs passed in $((SECONDS - start)) s"
if [ -s "$work/failures" ]; then
  echo "== stress: failed tests (runs failed of $n):"
  sort "$work/failures" | uniq -c | sort -rn | sed 's/^/   /'
fi
[ "$failed_runs" -eq 0 ]
