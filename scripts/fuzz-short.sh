#!/usr/bin/env bash
# Runs every fuzz target in the module (or in the packages given as arguments) briefly (FUZZTIME each, default 1s: ADR 0033), so CI exercises the
# fuzzers and their corpora on every change.
#
#   scripts/fuzz-short.sh [PKG...]              build each package's fuzz binary, fuzz every target
#   scripts/fuzz-short.sh --build-only DIR [PKG...]
#                                               only build the binaries, into DIR (kept there:
#                                               a later build relinks only what changed)
#   FUZZBIN=DIR scripts/fuzz-short.sh [PKG...]  fuzz with the binaries a --build-only run left in DIR
#
# Each package with a target is built once (`go test -c -fuzz=.`, the same instrumented binary
# `go test -fuzz` builds) and each target runs from it with go test's own flags, in the package's
# directory (so a failing input is written to its testdata/fuzz/<Target>, as `go test -fuzz`
# writes it) and with go test's fuzz cache ($GOCACHE/fuzz/<import path>). FUZZLANES (default 2)
# packages run at once: a target's start (its workers, the seed corpus, TestMain) leaves a core
# idle that the other lane fills, and one lane builds while the other fuzzes. Every target still
# fuzzes for its whole FUZZTIME.
#
# make test starts a --build-only run at the lowest priority (nice 19) before its unit step, so
# the builds (a minute or two of CPU: every package compiled again with the fuzzer's coverage
# instrumentation, 76 links) take the CPU the tests leave idle rather than time of their own;
# this step then waits for that run to end (DIR/.lock) and uses its binaries where they are. A
# package whose binary is not there is built here, as without FUZZBIN. make test's DIR is
# .cache/fuzzbin, which .ci/run's set-up fills first: a binary whose packages did not change
# is not linked again (about 0.25 s of CPU each).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=""
if [ "${1:-}" = --build-only ]; then
  [ -n "${2:-}" ] || { echo "fuzz-short: --build-only needs a directory" >&2; exit 2; }
  build_only=$2
  shift 2
fi
fuzztime=${FUZZTIME:-1s}
if [ -n "${FUZZBIN:-}" ]; then
  mkdir -p "$FUZZBIN" && FUZZBIN=$(cd "$FUZZBIN" && pwd) # the targets run from their package's directory
fi
lanes=${FUZZLANES:-2}
cachedir="$(go env GOCACHE)/fuzz"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fuzz_once runs target $2 of the package in directory $1 from its binary $3, its output in $log.
# -test.fuzzminimizetime=200ms: a worker that is minimizing an input (most often one that only
# found new coverage) when the target's time is up finishes that first, and Go's coordinator
# waits a second for it and then interrupts it; with a second of minimizing each target ran
# FUZZTIME plus a second, 200 ms ends it within about 0.2 s (the same fuzzing, measured in
# docs/BENCHMARKS.md). A failing input is still written to testdata/fuzz and printed (minimized
# for 200 ms); `go test -fuzz` on that target alone minimizes it for longer.
fuzz_once() {
  (cd "$1" && "$3" -test.paniconexit0 -test.timeout=10m0s -test.fuzzcachedir="$cachedir/$pkg" \
    -test.run='^$' -test.fuzz="^${2}\$" -test.fuzztime="$fuzztime" -test.fuzzminimizetime=200ms) >"$log" 2>&1
}

# build_bin builds package $1's fuzz binary into $2, its output in $3. -trimpath as make test's
# other steps: the compiled packages are cached by content, whatever the checkout's path.
# -s -w: no symbol table or DWARF, which fuzzing never reads (coverage counters and stack traces
# need neither): each of some 60 links costs about 2 s of CPU less.
# -l outside the standard library: the fuzzer's instrumented compile of the 673 packages the
# targets import takes 191 s of CPU with it against 266 s without (cold, one build each,
# docs/benchmarks-history.md), the most of a cold machine's fuzz build. Coverage guidance is
# the same (every function keeps its counters); a target runs its FUZZTIME either way, each
# input a little slower. The standard library keeps its inlining: the runtime and the
# packages every target leans on (strings, bytes, encoding/json) stay fast.
# CGO_ENABLED=0 whoever calls: make sets it, .ci/run's set-up does not (gcc makes Go's default
# 1), and every package above net compiles and links once per setting.
build_bin() {
  CGO_ENABLED=0 go test -c -fuzz=. -trimpath '-gcflags=all=-dwarf=false -l' -gcflags=std=-dwarf=false -ldflags='-s -w' -o "$2" "$1" >"$3" 2>&1
}

# bin_name is the file name of package $1's fuzz binary.
bin_name() { echo "$1" | tr / _; }

# coordinator_race tells whether a failed run ($log) is Go's own coordinator race at the end of a
# -fuzztime window (golang/go#75804, fixed in Go 1.27): the target fuzzed its whole time and
# found nothing, but the coordinator read the parent context's deadline before its child saw it
# and reported "context deadline exceeded". A finding is never taken for it: a crash or t.Fatal
# in the target prints "minimizing ... failing input" (or "Failing input written") first, and
# one the deadline cut short while minimizing is still written to testdata/fuzz.
coordinator_race() {
  grep -q 'context deadline exceeded' "$log" || return 1
  ! grep -q 'failing input\|Failing input' "$log" || return 1
  [ "$(corpus_count "$1" "$2")" = "$before" ]
}

corpus_count() {
  [ -d "$1/testdata/fuzz/$2" ] || { echo 0; return; }
  find "$1/testdata/fuzz/$2" -type f | wc -l
}

# flake tells whether a failed run ($log) took a slow worker on a loaded machine for a hung one
# and wrote an input that passes when run again on its own (a real crash or hang fails that
# re-run too, within its timeout). A flaky input is removed.
flake() {
  grep -q 'fuzzing process hung or terminated unexpectedly' "$log" || return 1
  local input
  input=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | head -1)
  [ -n "$input" ] || return 1
  [ -f "$1/$input" ] || return 1 # a missing input would re-run nothing and pass
  if (cd "$1" && "$3" -test.paniconexit0 -test.timeout=60s -test.run="^${2}\$/$(basename "$input")\$") >/dev/null 2>&1; then
    rm -f "$1/$input"
    return 0
  fi
  return 1
}

# failed prints the failing run's output and the target's name, and stops the other lanes.
failed() {
  cat "$log"; echo "fuzz: $pkg $1 FAILED"
  touch "$work/failed"
  return 1
}

# run_lane builds and fuzzes the packages listed in file $1 ("import-path dir" lines), one at a
# time; it writes how many targets ran and how many ended in the coordinator race to $1.count.
run_lane() {
  local count=0 races=0 pkg dir bin targets t
  log="$1.log"
  while read -r pkg dir; do
    [ ! -e "$work/failed" ] || return 1
    bin="$work/$(bin_name "$pkg").test"
    if [ -n "${FUZZBIN:-}" ] && [ -s "$FUZZBIN/$(bin_name "$pkg").err" ]; then
      cp "$FUZZBIN/$(bin_name "$pkg").err" "$log"; failed "(build)"; return 1
    elif [ -n "${FUZZBIN:-}" ] && [ -x "$FUZZBIN/$(bin_name "$pkg").test" ]; then
      bin="$FUZZBIN/$(bin_name "$pkg").test" # used where it is: the next build starts from it
    elif ! build_bin "$pkg" "$bin" "$log"; then
      failed "(build)"; return 1
    fi
    targets=$(cd "$dir" && "$bin" -test.list '^Fuzz' 2>"$log" | grep '^Fuzz') || {
      failed "(list: no fuzz target, yet a test file declares one)"; return 1
    }
    for t in $targets; do
      [ ! -e "$work/failed" ] || return 1
      echo "fuzz: $pkg $t ($fuzztime)"
      before=$(corpus_count "$dir" "$t")
      if ! fuzz_once "$dir" "$t" "$bin"; then
        if coordinator_race "$dir" "$t"; then
          echo "fuzz: $pkg $t: fuzzed its whole time with no finding; Go's coordinator then reported its own deadline (golang/go#75804)"
          races=$((races + 1))
        elif flake "$dir" "$t" "$bin"; then
          # Not a retry: the target fuzzed its whole time; the one input it reported runs on
          # its own, within a timeout, and passes, so the report was a slow worker's.
          echo "fuzz: $pkg $t: a slow worker was taken for a hung one; its input passes on its own within 60 s (removed)"
        else
          failed "$t"; return 1
        fi
      fi
      count=$((count + 1))
    done
    case $bin in "$work"/*) rm -f "$bin" ;; esac
  done <"$1"
  echo "$count $races" >"$1.count"
}

# fuzz_packages lists the packages whose test files declare a fuzz target ("import-path dir").
# (grep reads the files itself: `cat | grep -q` under pipefail fails whenever grep stops
# reading early, and the package would be left out without a word.)
fuzz_packages() {
  local pkg dir
  while read -r pkg dir; do
    if grep -qs '^func Fuzz' "$dir"/*_test.go; then echo "$pkg $dir"; fi
  done < <(go list -f '{{.ImportPath}} {{.Dir}}' "${@:-./...}")
  return 0
}

# --build-only: every binary into $build_only, one package at a time, under its .lock for the
# whole run (a FUZZBIN run waits on it); a failed build leaves its output in <name>.err.
# Each builds from a copy of the binary the last build left (go test -c links only when the
# -o file's build ID is not the packages' own), and is renamed to <name>.test once whole: a
# build stopped half-way (.ci/run stops its set-up's) never leaves a cut-short .test behind.
if [ -n "$build_only" ]; then
  mkdir -p "$build_only"
  exec 9>"$build_only/.lock"
  flock 9
  rm -f "$build_only/.done"
  n=0
  built=" "
  while read -r pkg dir; do
    name=$(bin_name "$pkg")
    built="$built$name.test "
    rm -f "$build_only/$name.tmp"
    if [ -f "$build_only/$name.test" ]; then cp "$build_only/$name.test" "$build_only/$name.tmp"; fi
    if build_bin "$pkg" "$build_only/$name.tmp" "$build_only/$name.log"; then
      mv "$build_only/$name.tmp" "$build_only/$name.test"
      rm -f "$build_only/$name.err"
      n=$((n + 1))
    else
      mv "$build_only/$name.log" "$build_only/$name.err"
      rm -f "$build_only/$name.tmp" "$build_only/$name.test"
      echo "fuzz: $pkg: build failed" >&2
    fi
    rm -f "$build_only/$name.log"
  done < <(fuzz_packages "$@")
  # A package of this module that no longer declares a target (or was not asked for) keeps
  # no binary, build error or half-built file here; nothing else in DIR is touched.
  prefix=$(bin_name "$(go list -m)")_
  for f in "$build_only/$prefix"*.test "$build_only/$prefix"*.err "$build_only/$prefix"*.tmp; do
    [ -e "$f" ] || continue
    f0=${f##*/}
    case $built in *" ${f0%.*}.test "*) ;; *) rm -f "$f" ;; esac
  done
  # .done: every package listed was built (or left its .err) by this run; a fuzz step uses the
  # directory only then, so a build cut short never hands it the previous run's binaries.
  touch "$build_only/.done"
  echo "fuzz: $n packages' fuzz binaries built into $build_only"
  exit 0
fi

# A --build-only run still building: wait for it (its lock), then use what it built.
# The lock is then held shared to the end, so that another make test's build into the same
# directory (an exclusive lock) does not replace a binary this run still starts targets from.
if [ -n "${FUZZBIN:-}" ]; then
  s=$SECONDS
  exec 8>>"$FUZZBIN/.lock"
  flock -s 8
  if [ -e "$FUZZBIN/.done" ]; then
    echo "fuzz: the binaries built beside the tests (waited $((SECONDS - s)) s for the last of them)"
  else
    echo "fuzz: no finished build in $FUZZBIN: building every package's binary here"
    FUZZBIN=""
  fi
fi

# The packages whose test files declare a fuzz target, each dealt to the lane with the fewest
# targets so far, so the lanes end together.
i=0
declared=0
load=()
for ((l = 0; l < lanes; l++)); do load+=(0); done
while read -r pkg dir; do
  n=$(cat "$dir"/*_test.go 2>/dev/null | grep -c '^func Fuzz' || true)
  declared=$((declared + n))
  least=0
  for ((l = 1; l < lanes; l++)); do [ "${load[l]}" -ge "${load[least]}" ] || least=$l; done
  echo "$pkg $dir" >>"$work/lane$least"
  load[least]=$((load[least] + n))
  i=$((i + 1))
done < <(fuzz_packages "$@")

pids=()
for ((l = 0; l < lanes; l++)); do
  [ -s "$work/lane$l" ] || continue
  run_lane "$work/lane$l" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ "$status" = 0 ] || exit 1

count=0
races=0
for ((l = 0; l < lanes; l++)); do
  [ -s "$work/lane$l" ] || continue
  read -r c r <"$work/lane$l.count"
  count=$((count + c))
  races=$((races + r))
done
echo "fuzz: $count targets in $i packages ran for $fuzztime each ($races ended in the Go coordinator's deadline race, with no finding)"
# Every target a test file declares ran: a package or target left out is a failure, not a
# smaller run.
if [ "$count" != "$declared" ]; then
  echo "fuzz: the test files declare $declared fuzz targets (func Fuzz...), $count ran: a package or target was left out" >&2
  exit 1
fi
