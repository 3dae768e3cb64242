# class: legitimate
# expect: allowed
# control: sandbox
# reason: building, vetting and running a small self-checking Go program offline with the host's Go toolchain (bound with /usr); not run when no Go is installed there

# Each dispatch starts with an empty build cache, so the program imports nothing: it compiles
# the runtime alone (seconds), where `go test` would compile half the standard library (about a
# minute on two busy cores). Its main is its test: it exits 1 when add is wrong.
g=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -1)
[ -n "$g" ] || { missing go "(looked on PATH, in /usr/local/go and /usr/lib/go)"; exit 0; }
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOCACHE="$HOME/go-cache" GOPATH="$HOME/go"
mkdir -p selftest-go && cd selftest-go
printf 'module example.com/selftest\n\ngo 1.21\n' >go.mod
printf 'package main\n\nfunc add(a, b int) int { return a + b }\n\nfunc main() {\n\tif add(2, 3) != 5 {\n\t\tprintln("FAIL: 2+3 != 5")\n\t\tpanic("test failed")\n\t}\n\tprintln("ok: add")\n}\n' >main.go
attempt sh -c '"$1" vet . && "$1" build -o "$HOME/selftest-bin" . && "$HOME/selftest-bin" 2>&1' sh "$g"
