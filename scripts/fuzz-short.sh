#!/usr/bin/env bash
# Runs every fuzz target in the module briefly (FUZZTIME each, default 5s), so CI exercises the
# fuzzers and their corpora on every change. Each target needs its own `go test -fuzz` run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
count=0
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "fuzz: $pkg $t ($fuzztime)"
    go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" -fuzzminimizetime=2s "$pkg" >/tmp/fuzz-$$.log 2>&1 || {
      cat /tmp/fuzz-$$.log; echo "fuzz: $pkg $t FAILED"; exit 1; }
    count=$((count + 1))
  done
done
rm -f /tmp/fuzz-$$.log
echo "fuzz: $count targets ran for $fuzztime each"
