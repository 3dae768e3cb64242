#!/usr/bin/env bash
# Prints the lines of agora's own non-test .go files that are compiled into the three shipped
# programs (cmd/agora, cmd/agora-full, cmd/agora-worker), by package, then their total: the
# measure of "product code" the house's line counts use. Test-support packages (agoratest,
# k8stest, the *test fakes) and the bench mains are not linked into a program, so they do not
# count.
#
#   scripts/product-lines.sh [DIR]    DIR: a checkout (default: this one)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
mod=$(go list -m)
go list -deps -f '{{if .Module}}{{if eq .Module.Path "'"$mod"'"}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{end}}{{end}}' \
  ./cmd/agora ./cmd/agora-full ./cmd/agora-worker | sort -u |
  while read -r dir files; do
    n=0
    for f in $files; do n=$((n + $(wc -l <"$dir/$f"))); done
    echo "$n ${dir#"$PWD"/}"
  done | sort -k2 | awk '{print; s += $1} END {print s, "total"}'
