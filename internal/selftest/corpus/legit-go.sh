# class: legitimate
# expect: allowed
# control: sandbox
# reason: building, running and testing a small Go module offline with the host's Go toolchain (bound with /usr); not run when no Go is installed there
# One row for build and test, since each dispatch starts with an empty build cache and compiling
# the standard library is most of the time either takes.
g=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -1)
[ -n "$g" ] || { report missing "go is not installed in the sandbox (PATH, /usr/local/go, /usr/lib/go)"; exit 0; }
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOCACHE="$HOME/go-cache" GOPATH="$HOME/go"
mkdir -p selftest-go && cd selftest-go
printf 'module example.com/selftest\n\ngo 1.21\n' >go.mod
printf 'package main\n\nfunc add(a, b int) int { return a + b }\n\nfunc main() { println("sum", add(2, 3)) }\n' >main.go
printf 'package main\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif add(2, 3) != 5 {\n\t\tt.Fatal("2+3 != 5")\n\t}\n}\n' >main_test.go
attempt sh -c '"$1" build -o "$HOME/selftest-bin" . && "$HOME/selftest-bin" 2>&1 && "$1" test -count=1 -vet=off .' sh "$g"
