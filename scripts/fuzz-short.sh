#!/usr/bin/env bash
# Runs every fuzz target in the module briefly (FUZZTIME each, default 5s), so CI exercises the
# fuzzers and their corpora on every change. Each target needs its own `go test -fuzz` run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fuzz_once() {
  go test -run='^$' -fuzz="^${2}\$" -fuzztime="$fuzztime" -fuzzminimizetime=2s "$1" >"$log" 2>&1
}

# flake tells whether a failed run ($log) is the fuzzer's own trouble on a loaded machine
# rather than a finding: either its shutdown timed out with no failing input, or it took a
# slow worker for a hung one and wrote an input that passes when run again on its own (a
# real crash or hang fails that re-run too, within its timeout). A flaky input is removed.
flake() {
  if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
    return 0
  fi
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
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "fuzz: $pkg $t ($fuzztime)"
    if ! fuzz_once "$pkg" "$t"; then
      if flake "$pkg" "$t"; then
        echo "fuzz: $pkg $t: the fuzzer itself timed out on this loaded machine (no input reproduces a failure); running it again"
        fuzz_once "$pkg" "$t" || { cat "$log"; echo "fuzz: $pkg $t FAILED"; exit 1; }
      else
        cat "$log"; echo "fuzz: $pkg $t FAILED"; exit 1
      fi
    fi
    count=$((count + 1))
  done
done
echo "fuzz: $count targets ran for $fuzztime each"
