package catalog_test

import (
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// FuzzParseCapabilityDoc parses arbitrary capability.yaml bytes: it must never panic; failures are
// located (strictyaml.Errors, or the size refusal); anything accepted has its defaults
// applied and only valid entries.
func FuzzParseCapabilityDoc(f *testing.F) {
	for _, s := range []string{
		"",
		"tools: [read_file]\ncommands: [\"go test **\"]\negress: [api.github.com]\nnetwork: egress\nsetup: bin/setup.sh\n",
		"tools: [nope, read_file, read_file]\ncommands: [\"** x\", \"* y\", \"a [\"]\n",
		"egress: [\"*.example.com\", Bad]\nnetwork: wide\n",
		"setup: bin/setup-link\n",
		"description: &a x\nsetup: *a\n",
		"overlay: [\".claude/**\", CLAUDE.md, \"../x\", /abs, \"a/**b\", \"[\"]\n",
		"overlay: [\".GIT/hooks/*\", \"**\", \"a/./b\", \"a//b\", \"\"]\n",
		"approve: [write_file, {command: \"git push *\"}, {tool: run_command}]\n",
		"approve: [nope, {command: \"* **\"}, {tool: write_file, command: ls}, {}, [x]]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := catalog.ParseCapabilityDoc("capability.yaml", src, capFiles)
		if err != nil {
			var es strictyaml.Errors
			if !errors.As(err, &es) && len(src) <= 256<<10 {
				t.Fatalf("error is %T, want strictyaml.Errors: %v", err, err)
			}
			return
		}
		if g.Network != "none" && g.Network != "egress" {
			t.Fatalf("accepted network %q", g.Network)
		}
		if g.Tools == nil || g.Commands == nil || g.Egress == nil {
			t.Fatalf("accepted grants with a nil list: %#v", g)
		}
		for _, c := range g.Commands {
			if _, err := grant.ParseCommandPattern(c); err != nil {
				t.Fatalf("accepted a bad command pattern %q: %v", c, err)
			}
		}
		for _, r := range g.Approve {
			if err := r.Validate(); err != nil {
				t.Fatalf("accepted a bad approve rule %+v: %v", r, err)
			}
		}
		if g.Setup != "" && g.Setup != "bin/setup.sh" {
			t.Fatalf("accepted setup %q that is not a regular file of the capability", g.Setup)
		}
		for _, p := range g.Overlay {
			if err := catalog.CheckOverlayPattern(p); err != nil {
				t.Fatalf("accepted a bad overlay pattern %q: %v", p, err)
			}
		}
	})
}
