#!/usr/bin/env bash
# Runs every fuzz target in the module briefly (FUZZTIME each, default 3s: 159 targets in ci14, about 8 minutes on 2 cores), so CI exercises the
# fuzzers and their corpora on every change. Each target needs its own `go test -fuzz` run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-3s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fuzz_once() {
  go test -run='^$' -fuzz="^${2}\$" -fuzztime="$fuzztime" -fuzzminimizetime=2s "$1" >"$log" 2>&1
}

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
  local dir
  dir=$(go list -f '{{.Dir}}' "$1")
  [ -d "$dir/testdata/fuzz/$2" ] || { echo 0; return; }
  find "$dir/testdata/fuzz/$2" -type f | wc -l
}

# flake tells whether a failed run ($log) took a slow worker on a loaded machine for a hung one
# and wrote an input that passes when run again on its own (a real crash or hang fails that
# re-run too, within its timeout). A flaky input is removed.
flake() {
  grep -q 'fuzzing process hung or terminated unexpectedly' "$log" || return 1
  local input
  input=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | head -1)
  [ -n "$input" ] || return 1
  local dir
  dir=$(go list -f '{{.Dir}}' "$1")
  [ -f "$dir/$input" ] || return 1 # a missing input would re-run nothing and pass
  if go test -run="^${2}\$/$(basename "$input")\$" -timeout=60s "$1" >/dev/null 2>&1; then
    rm -f "$dir/$input"
    return 0
  fi
  return 1
}

count=0
races=0
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "fuzz: $pkg $t ($fuzztime)"
    before=$(corpus_count "$pkg" "$t")
    if ! fuzz_once "$pkg" "$t"; then
      if coordinator_race "$pkg" "$t"; then
        echo "fuzz: $pkg $t: fuzzed its whole time with no finding; Go's coordinator then reported its own deadline (golang/go#75804)"
        races=$((races + 1))
      elif flake "$pkg" "$t"; then
        echo "fuzz: $pkg $t: a slow worker was taken for a hung one and its input passes on its own; running the target again"
        fuzz_once "$pkg" "$t" || coordinator_race "$pkg" "$t" || { cat "$log"; echo "fuzz: $pkg $t FAILED"; exit 1; }
      else
        cat "$log"; echo "fuzz: $pkg $t FAILED"; exit 1
      fi
    fi
    count=$((count + 1))
  done
done
echo "fuzz: $count targets ran for $fuzztime each ($races ended in the Go coordinator's deadline race, with no finding)"
