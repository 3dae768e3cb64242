package mcpserver_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// notTools are the agora_ names docs/mcp.md may give that are not tools, and why; each must
// stay unregistered.
var notTools = map[string]string{
	"agora_resume":              "the key of a resumed child's input that holds the answer",
	"agora_capability_register": "the doc's example of a tool that does not exist",
	"agora_weaken":              "the build tag of selftest's control test (weaken_on.go files), no tool",
	"agora_worker_exec":         "the build tag of the exec-only worker (agora-worker-exec, ADR 0035), no tool",
}

// TestMCPDoc_NamesExactlyTheRegisteredTools reads docs/mcp.md against the tools the server
// registers: every agora_ name it gives is a registered tool (or one of notTools, which must
// not be); its tools table lists each registered tool once, with its tier; its count and its
// consent-ceiling table agree. Failed before: the doc named agora_orch_status, which no server
// registers.
func TestMCPDoc_NamesExactlyTheRegisteredTools(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	reg := mcpserver.RegisteredToolsForTest()
	for name, why := range notTools {
		if _, ok := reg[name]; ok {
			t.Errorf("%s is registered, but the doc gives it as %s", name, why)
		}
	}
	// Every name in code spans: `agora_x`, and `_describe` style suffixes of a named tool.
	lines := strings.Split(doc, "\n")
	name := regexp.MustCompile(`\bagora_[a-z0-9_]+\b`)
	for i, line := range lines {
		for _, span := range regexp.MustCompile("`[^`]*`").FindAllString(line, -1) {
			for _, n := range name.FindAllString(span, -1) {
				if _, ok := reg[n]; !ok && notTools[n] == "" {
					t.Errorf("docs/mcp.md:%d names %s, which the server does not register (known: %s)", i+1, n, strings.Join(slices.Sorted(maps.Keys(reg)), ", "))
				}
			}
		}
	}

	// The tools table: "| `agora_x` | tier | ...", between "## The tools" and the next heading.
	_, tail, ok := strings.Cut(doc, "\n## The tools\n")
	if !ok {
		t.Fatal(`docs/mcp.md has no "## The tools" section`)
	}
	section, _, _ := strings.Cut(tail, "\n#")
	row := regexp.MustCompile("(?m)^\\| `(agora_[a-z0-9_]+)` \\| ([a-z]+) \\|")
	listed := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if _, dup := listed[m[1]]; dup {
			t.Errorf("the tools table lists %s twice", m[1])
		}
		listed[m[1]] = m[2]
	}
	for n, tier := range reg {
		switch got, ok := listed[n]; {
		case !ok:
			t.Errorf("the tools table misses %s (tier %s)", n, tier)
		case got != tier:
			t.Errorf("the tools table gives %s tier %s; the server's is %s", n, got, tier)
		}
	}
	for n := range listed {
		if _, ok := reg[n]; !ok {
			t.Errorf("the tools table lists %s, which the server does not register", n)
		}
	}
	count := regexp.MustCompile(`Exactly these ([a-z]+)`).FindStringSubmatch(section)
	if count == nil || count[1] != numberWord(len(reg)) {
		t.Errorf("the tools section says %q; the server registers %d (%s)", count, len(reg), numberWord(len(reg)))
	}

	// The consent ceilings: "| tier | N | `agora_a`, `agora_b` ..." where N counts the tools
	// at or below the tier and the names are the tools of exactly that tier.
	_, tail, ok = strings.Cut(doc, "\n## Consent ceilings\n")
	if !ok {
		t.Fatal(`docs/mcp.md has no "## Consent ceilings" section`)
	}
	section, _, _ = strings.Cut(tail, "\n#")
	ceil := regexp.MustCompile("(?m)^\\| `([a-z]+)`[^|]* \\| ([0-9]+) \\| ([^|]*)\\|")
	seen := map[string]bool{}
	for _, m := range ceil.FindAllStringSubmatch(section, -1) {
		tier, n, names := m[1], m[2], m[3]
		seen[tier] = true
		var want []string
		atMost := 0
		for _, c := range mcpserver.Ceilings {
			for tool, tt := range reg {
				if tt == c.String() && tt == tier {
					want = append(want, tool)
				}
			}
		}
		for _, c := range mcpserver.Ceilings {
			for _, tt := range reg {
				if tt == c.String() {
					atMost++
				}
			}
			if c.String() == tier {
				break
			}
		}
		if n != strconv.Itoa(atMost) {
			t.Errorf("ceiling %s: the doc counts %s tools, the server %d", tier, n, atMost)
		}
		got := name.FindAllString(names, -1)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("ceiling %s adds %q in the doc, %q on the server", tier, got, want)
		}
	}
	for _, c := range mcpserver.Ceilings {
		if !seen[c.String()] {
			t.Errorf("the consent ceilings table has no row for %s", c)
		}
	}
}

func numberWord(n int) string {
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	if n < len(words) {
		return words[n]
	}
	return strconv.Itoa(n)
}
