package internal_test

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
)

// archDoc is docs/ARCHITECTURE.md as the tests of this package (run in internal/) see it.
const archDoc = "../docs/ARCHITECTURE.md"

// testHelpers are the module's packages that exist only for tests: faithful fakes, harnesses
// and fixtures. They are left out of the layer table and may be left out of the package list;
// TestArchitectureTestHelpers fails if the shipped binary links one, so the exemption stays true.
var testHelpers = []struct{ pkg, why string }{
	{"internal/agoratest", "shared test fixtures"},
	{"internal/agoratest/s3test", "a real S3 server (versitygw) for the object-storage tests"},
	{"internal/audit/audittest", "audit log fixtures"},
	{"internal/oidcauth/oidctest", "the real OpenID Connect provider the OIDC tests sign in against"},
	{"internal/k8stest", "a real control plane and node for the Kubernetes provider's tests"},
	{"internal/k8stest/nodeparse", "k8stest's readers of the real node's tool output (mountinfo, nft sets, ctr imports)"},
	{"internal/runtime/agentrun/agentruntest", "the real gateway on a socket and an in-memory auditor, for the worker's and the adapters' tests"},
	{"internal/runtime/claudert/anthropictest", "a faithful fake Messages API"},
	{"internal/runtime/claudert/internal/fakeclaude", "a stand-in claude CLI for the runtime's tests"},
	{"internal/runtime/codexrt/responsestest", "a faithful fake Responses API"},
	{"internal/runtime/openairt/openaitest", "a faithful fake chat-completions server"},
	{"internal/secret/redact/redacttest", "the reader that tries to read a redacted value back"},
	{"internal/tracing/otlprecv", "an OTLP receiver the tracing tests export to"},
}

func isTestHelper(rel string) bool {
	return slices.ContainsFunc(testHelpers, func(h struct{ pkg, why string }) bool { return h.pkg == rel })
}

// documented lists, without the module prefix and sorted, the packages ARCHITECTURE.md
// describes: every package under cmd/ and internal/ with non-test Go files, test helpers left
// out (bench/ holds harnesses, not agora).
func (g *graph) documented() []string {
	var out []string
	for _, dir := range []string{"cmd", "internal"} {
		for _, rel := range g.under(dir) {
			if len(g.pkgs[module+rel].GoFiles) > 0 && !isTestHelper(rel) {
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestArchitectureTestHelpers keeps the exemption of testHelpers honest: each still exists
// and nothing the agora binary links is one of them.
func TestArchitectureTestHelpers(t *testing.T) {
	g := loadGraph(t)
	for _, main := range []string{"cmd/agora", "cmd/agora-full"} { // the front and the whole program
		shipped := g.closure(t, module+main)
		for _, h := range testHelpers {
			if !g.own(module + h.pkg) {
				t.Errorf("test helper %s not found: the list in internal/arch_test.go is stale", h.pkg)
				continue
			}
			if slices.Contains(shipped, module+h.pkg) {
				t.Errorf("%s is exempted from ARCHITECTURE.md as tests only (%s), but %s links it: %s",
					h.pkg, h.why, main, strings.ReplaceAll(strings.Join(g.chain(t, module+main, h.pkg), " → "), module, ""))
			}
		}
	}
}

// readArchDoc reads docs/ARCHITECTURE.md.
func readArchDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatalf("read docs/ARCHITECTURE.md: %v", err)
	}
	return string(b)
}

// packageList returns the packages the first block under "## Packages and the import graph"
// names, without the module prefix. A line names one or more packages, comma-separated,
// before its description (two or more spaces); a name without cmd/ or internal/ is relative
// to the directory of the line's first name ("internal/orch/client, api"); lines that start
// with a space continue a description.
func packageList(doc string) ([]string, error) {
	_, rest, ok := strings.Cut(doc, "\n## Packages and the import graph\n")
	if !ok {
		return nil, fmt.Errorf(`no "## Packages and the import graph" section`)
	}
	_, rest, ok = strings.Cut(rest, "\n```\n")
	if !ok {
		return nil, fmt.Errorf("no ``` block under \"## Packages and the import graph\"")
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		return nil, fmt.Errorf("the package list's ``` block is not closed")
	}
	var out []string
	for line := range strings.Lines(block) {
		if line == "" || line[0] == ' ' || line[0] == '\n' {
			continue
		}
		names, _, _ := strings.Cut(strings.TrimRight(line, "\n"), "  ")
		var first string
		for i, name := range strings.Split(names, ",") {
			name = strings.TrimSpace(name)
			if i == 0 {
				first = name
			} else if !strings.HasPrefix(name, "internal/") && !strings.HasPrefix(name, "cmd/") {
				name = path.Join(path.Dir(first), name)
			}
			out = append(out, name)
		}
	}
	return out, nil
}

// TestArchitecturePackageList fails when a package is missing from ARCHITECTURE.md's list of
// packages, or the list names one that no longer exists. The descriptions are written by hand.
func TestArchitecturePackageList(t *testing.T) {
	g := loadGraph(t)
	listed, err := packageList(readArchDoc(t))
	if err != nil {
		t.Fatalf("docs/ARCHITECTURE.md: %v", err)
	}
	for _, rel := range g.documented() {
		if !slices.Contains(listed, rel) {
			t.Errorf("%s is missing from the package list in docs/ARCHITECTURE.md (\"## Packages and the import graph\"): "+
				"add a line saying what it is for, or, if tests alone use it, add it to testHelpers in internal/arch_test.go", rel)
		}
	}
	for _, rel := range listed {
		if !g.own(module + rel) {
			t.Errorf("docs/ARCHITECTURE.md's package list names %s, which is not a package of the module: remove or rename it", rel)
		}
	}
}
