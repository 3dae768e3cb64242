package internal_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite what is generated from the current import graph: internal/testdata/closure-*.txt (-run Closure), docs/ARCHITECTURE.md's layer table (-run Architecture)")

// unprivileged are the packages that hold no privilege: the MCP server, which an AI talks to,
// and the worker, which runs in the sandbox. Their whole closure is pinned in a committed list,
// so a new import on their side shows in the diff of a change and someone says why it is fine.
var unprivileged = []struct{ pkg, file string }{
	{"internal/mcpserver", "closure-mcpserver.txt"},
	{"internal/worker", "closure-worker.txt"},
	// The whole program bound into every sandbox; TestWorkerBinary checks the built
	// binary's module list against this file's.
	{"cmd/agora-worker", "closure-agora-worker.txt"},
}

const closureHeader = `# The non-test import closure of %s: the module's packages and every
# third-party module it links, one per line, sorted; the standard library is left out.
# TestImportClosure compares it with the graph; after an intended change, rewrite it with
#   go test ./internal -run Closure -update
# and say in the commit why the new import is fine on the unprivileged side.
`

// TestImportClosure compares the closures of the unprivileged packages with their lists.
func TestImportClosure(t *testing.T) {
	g := loadGraph(t)
	for _, u := range unprivileged {
		t.Run(filepath.Base(u.pkg), func(t *testing.T) {
			got := g.closure(t, module+u.pkg)
			file := filepath.Join("testdata", u.file)
			if *update {
				text := fmt.Sprintf(closureHeader, u.pkg) + strings.Join(got, "\n") + "\n"
				if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := readClosure(file)
			if err != nil {
				t.Fatalf("%v; write it with `go test ./internal -run Closure -update`", err)
			}
			if d := lineDiff(want, got); d != "" {
				t.Errorf("the closure of %s is not %s (+ now linked, - no longer linked):\n%s"+
					"if the change is intended, run `go test ./internal -run Closure -update` and commit %s, saying why the import is fine",
					u.pkg, "internal/"+file, d, "internal/"+file)
			}
		})
	}
}

// readClosure reads a closure list, skipping comments and blank lines.
func readClosure(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read closure list: %w", err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, nil
}

// lineDiff lists the lines only in got (+) and only in want (-), or "" when the sets agree.
func lineDiff(want, got []string) string {
	var b strings.Builder
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "\t+ %s\n", l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "\t- %s\n", l)
		}
	}
	return b.String()
}
