package runtimes

import (
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/claudert/claudedef"
	"github.com/agora-dev/agora/internal/runtime/codexrt/codexdef"
	"github.com/agora-dev/agora/internal/runtime/execrt/execdef"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaidef"
)

func TestAll_NamesAreUniqueAndLookedUp(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range All() {
		if r.Name == "" || seen[r.Name] {
			t.Errorf("runtime name %q is empty or repeated", r.Name)
		}
		seen[r.Name] = true
		if got, ok := Lookup(r.Name); !ok || got.Name != r.Name {
			t.Errorf("Lookup(%q) = %q, %v", r.Name, got.Name, ok)
		}
	}
	if _, ok := Lookup("Codex"); ok {
		t.Error("Lookup folded case: Codex is not a runtime")
	}
	if _, ok := Lookup(Default); !ok {
		t.Errorf("the default runtime %q is not in All", Default)
	}
	if got, want := Names(), []string{"exec", "claude-code", "openai", "codex"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q (the order documents list them in)", got, want)
	}
	if got, want := Hosted(), []string{"claude-code", "codex"}; !slices.Equal(got, want) {
		t.Errorf("Hosted() = %q, want %q", got, want)
	}
}

// TestAll_Complete: what the host needs of each runtime is filled in, so a new runtime
// cannot be added half-described.
func TestAll_Complete(t *testing.T) {
	for _, r := range All() {
		if r.Hosted() {
			if r.CLI.NPM == "" {
				t.Errorf("%s: a host CLI without the npm package that installs it", r.Name)
			}
			for _, arch := range []string{"amd64", "arm64"} {
				if n, ok := r.CLI.NativeFor(arch); !ok || n.Package == "" || n.Path == "" {
					t.Errorf("%s: no native executable for %s", r.Name, arch)
				}
			}
		}
		if m := r.Model; m.API != "" {
			if m.API != APIOpenAI && m.API != APIAnthropic || m.BaseURLKey == "" || m.KeyKey == "" || m.DefaultBaseURL == "" {
				t.Errorf("%s: incomplete model route %+v", r.Name, m)
			}
		}
		if r.Needs.Command && r.Model.API != "" {
			t.Errorf("%s: a fixed command reaches no model through agora", r.Name)
		}
	}
}

func TestRuntime_Problems(t *testing.T) {
	tests := []struct {
		name          string
		rt            Runtime
		command       []string
		model, prompt string
		want          []string
	}{
		{"exec without a command", execdef.Runtime, nil, "", "", []string{"the exec runtime needs a command (--command or command:)"}},
		{"exec with one", execdef.Runtime, []string{"true"}, "", "", nil},
		{"openai without model or prompt, with a command", openaidef.Runtime, []string{"x"}, "", "", []string{
			"the openai runtime needs a model (--model)",
			"the openai runtime needs a system prompt (--system-prompt or --prompt-file)",
			"command applies to the exec runtime only, not openai"}},
		{"codex without a model names where to find one", codexdef.Runtime, nil, "", "p", []string{
			"the codex runtime needs a model (--model), one `codex debug models` lists"}},
		{"claude-code needs no model", claudedef.Runtime, nil, "", "p", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Problems(tt.rt, tt.command, tt.model, tt.prompt); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
