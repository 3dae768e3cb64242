package dispatchexec_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/orch/dispatchexec"
)

// TestReviewerRefusal: a reviewer must give its review as a model's final answer that no
// process it starts can write. An exec command is refused on any target, every reviewer on
// a sandbox: none target, and a CLI runtime (claude-code, codex) on a docker or kubernetes
// target, whose CLI runs from a readable file; each refusal says why and what to do instead.
func TestReviewerRefusal(t *testing.T) {
	local := config.Target{Provider: config.ProviderLocal, Sandbox: "bwrap"}
	docker := config.Target{Provider: config.ProviderDocker}
	k8s := config.Target{Provider: config.ProviderKubernetes}
	none := config.Target{Provider: config.ProviderLocal, Sandbox: "none"}
	for _, tt := range []struct {
		name, runtime string
		target        config.Target
		want          []string // "" for none
	}{
		{"openai on local", "openai", local, nil},
		{"openai on docker", "openai", docker, nil},
		{"openai on kubernetes", "openai", k8s, nil},
		{"claude-code on local", "claude-code", local, nil},
		{"codex on local", "codex", local, nil},
		{"claude-code on the zero target", "claude-code", config.Target{}, nil},
		{"exec", "exec", local, []string{`subagent "r" runs the exec runtime and cannot review`, "final answer, which no process it starts can write",
			"shares every channel", "verify gate (verify: {command: [...]})", "(claude-code, openai, codex)"}},
		{"no runtime is exec", "", local, []string{"runs the exec runtime"}},
		{"exec on docker", "exec", docker, []string{"runs the exec runtime"}},
		{"openai unsandboxed", "openai", none, []string{`on target "t", which has sandbox: none`, "as agora's own user"}},
		{"claude-code on docker", "claude-code", docker, []string{`runs claude-code, whose CLI a docker target ("t") runs from a file the CLI's own tools can read`,
			"review this task's work with an openai subagent"}},
		{"codex on kubernetes", "codex", k8s, []string{"runs codex, whose CLI a kubernetes target"}},
		{"unknown runtime", "python", local, []string{`runtime "python"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := dispatchexec.ReviewerRefusal("r", tt.runtime, "t", tt.target)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
	if err := dispatchexec.ReviewerRefusal("r", "openai", "", none); err == nil || !strings.Contains(err.Error(), `target "local"`) {
		t.Errorf("the default target is named as such: %v", err)
	}
}
