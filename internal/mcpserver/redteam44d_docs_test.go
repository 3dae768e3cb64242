package mcpserver_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestRedTeam44D_NoDocNamesAnUnregisteredTool reads every doc a person or an AI reads to
// learn the MCP tools (README.md and docs/*.md, not only docs/mcp.md) for names of the agora_
// form: each is a tool the server registers, a name docs/mcp.md gives as no tool (notTools),
// or one of agora's other agora_ names read from the code that defines them (the /metrics
// series in internal/obs and internal/cli/replicate.go, with their _bucket, _sum and _count
// series and an "agora_warm_slots_*" family; the web view's OIDC cookie). So a doc naming a
// tool the server does not have (agora_orch_status, say) fails here wherever it is. Held.
func TestRedTeam44D_NoDocNamesAnUnregisteredTool(t *testing.T) {
	root := filepath.Join("..", "..")
	known := map[string]string{}
	for name := range mcpserver.RegisteredToolsForTest() {
		known[name] = "a registered tool"
	}
	for name, why := range notTools {
		known[name] = why
	}
	literal := regexp.MustCompile(`"(agora_[a-z0-9_]+)"`)
	var sources []string
	obs, err := filepath.Glob(filepath.Join(root, "internal", "obs", "*.go"))
	if err != nil || len(obs) == 0 {
		t.Fatalf("no internal/obs sources: %v", err)
	}
	sources = append(sources, obs...)
	sources = append(sources, filepath.Join(root, "internal", "cli", "replicate.go"), filepath.Join(root, "internal", "web", "oidc.go"))
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			if _, ok := known[m[1]]; !ok {
				known[m[1]] = "a name " + filepath.Base(f) + " defines"
			}
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	name := regexp.MustCompile(`\bagora_[a-z0-9_]+(\*)?`)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, n := range name.FindAllString(line, -1) {
				if family, ok := strings.CutSuffix(n, "*"); ok {
					if !hasPrefixIn(known, family) {
						t.Errorf("%s:%d names the family %s, of which agora defines nothing", filepath.Base(doc), i+1, n)
					}
					continue
				}
				base := n
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, s); ok {
						if _, isMetric := known[b]; isMetric {
							base = b
						}
					}
				}
				if _, ok := known[base]; !ok {
					t.Errorf("%s:%d names %s: no tool the MCP server registers, and no other name agora defines", filepath.Base(doc), i+1, n)
				}
			}
		}
	}
}

func hasPrefixIn(m map[string]string, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
