# class: legitimate
# expect: allowed
# control: sandbox
# reason: testing a small Go package offline with the host's Go toolchain; not run when no Go is installed there
g=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -1)
[ -n "$g" ] || { report missing "go is not installed in the sandbox (PATH, /usr/local/go, /usr/lib/go)"; exit 0; }
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOCACHE="$HOME/go-cache" GOPATH="$HOME/go"
mkdir -p selftest-gotest && cd selftest-gotest
printf 'module example.com/selftest\n\ngo 1.21\n' >go.mod
printf 'package add\n\nfunc Add(a, b int) int { return a + b }\n' >add.go
printf 'package add\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("2+3 != 5")\n\t}\n}\n' >add_test.go
attempt "$g" test -count=1 .
