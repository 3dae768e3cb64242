package provision_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/digest"
)

func TestWriter_SubagentPinsCapabilities(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	toolsDir := capDir(t, map[string]string{"f": "v1"})
	_, tools1 := f.registerCap(t, "tools", toolsDir)
	_, lint := f.registerCap(t, "lint", capDir(t, map[string]string{"f": "lint"}))

	spec := provision.SubagentSpec{
		Description: "reviews", Runtime: "exec", Command: []string{"review", "--strict"},
		Capabilities: []string{"tools", "lint@" + string(lint.Digest)},
	}
	c, sa1 := f.registerSubagent(t, "reviewer", spec)
	if c.Action != catalog.ActionCreate {
		t.Errorf("Register = %+v", c)
	}
	wantPins := []catalog.Pin{{Name: "tools", Digest: tools1.Digest}, {Name: "lint", Digest: lint.Digest}}
	if diff := cmp.Diff(wantPins, sa1.Meta.Capabilities); diff != "" {
		t.Errorf("pins mismatch (-want +got):\n%s", diff)
	}

	// A later capability update does not move the subagent's pin.
	writeFiles(t, toolsDir, map[string]string{"f": "v2"})
	_, tools2 := f.registerCap(t, "tools", toolsDir)
	cur, err := f.r.Resolve(ctx, catalog.KindSubagent, "reviewer")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Digest != sa1.Digest || !cmp.Equal(cur.Meta.Capabilities, wantPins) {
		t.Errorf("subagent after a capability update = %s %v, want unchanged pins", cur.Digest, cur.Meta.Capabilities)
	}
	content, err := f.r.Content(cur)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseSubagentDoc(content)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantPins, doc.Capabilities); diff != "" {
		t.Errorf("stored pins mismatch (-want +got):\n%s", diff)
	}

	// Assign makes a new version with new pins and keeps everything else.
	audits := f.auditCount(t)
	ac, sa2, err := f.w.Assign(ctx, "assigner", "reviewer", []string{"tools"})
	if err != nil {
		t.Fatal(err)
	}
	if ac.Action != catalog.ActionUpdate || ac.Previous != sa1.Digest || sa2.Digest == sa1.Digest {
		t.Errorf("Assign = %+v", ac)
	}
	content2, _ := f.r.Content(sa2)
	doc2, err := catalog.ParseSubagentDoc(content2)
	if err != nil {
		t.Fatal(err)
	}
	want2 := doc
	want2.Capabilities = []catalog.Pin{{Name: "tools", Digest: tools2.Digest}}
	if diff := cmp.Diff(want2, doc2); diff != "" {
		t.Errorf("assigned subagent mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"catalog.subagent.assign subagent/reviewer"}, f.auditKinds(t, audits)); diff != "" {
		t.Errorf("audit mismatch (-want +got):\n%s", diff)
	}
	// Assigning the same set again is a no-op.
	if ac, _, err := f.w.Assign(ctx, "assigner", "reviewer", []string{"tools"}); err != nil || ac.Action != catalog.ActionUnchanged {
		t.Errorf("second Assign = %+v, %v; want unchanged", ac, err)
	}
	// The old version stays pinnable.
	if v, err := f.r.Resolve(ctx, catalog.KindSubagent, "reviewer@"+string(sa1.Digest)); err != nil || v.Digest != sa1.Digest {
		t.Errorf("pinned old subagent = %v", err)
	}
}

func TestWriter_AssignRefuses(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.registerCap(t, "tools", capDir(t, map[string]string{"f": "x"}))
	f.registerSubagent(t, "sa", provision.SubagentSpec{Command: []string{"run"}})
	if _, _, err := f.w.Assign(ctx, "a", "missing", []string{"tools"}); !errors.Is(err, view.ErrNotFound) {
		t.Errorf("Assign of an unknown subagent = %v", err)
	}
	_, _, err := f.w.Assign(ctx, "a", "sa", []string{"nope"})
	if err == nil || err.Error() != `subagent "sa": capability "nope" not found; known: tools` {
		t.Errorf("Assign of an unknown capability = %v", err)
	}
	if _, _, err := f.w.Assign(ctx, "a", "sa", []string{"tools", "tools"}); err == nil || !strings.Contains(err.Error(), `capability "tools" listed twice`) {
		t.Errorf("Assign of a duplicate = %v", err)
	}
}

func TestWriter_PrepareSubagent(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	tests := []struct {
		name string
		spec provision.SubagentSpec
		want string
	}{
		{"exec needs a command", provision.SubagentSpec{}, "the exec runtime needs a command"},
		{"unknown runtime", provision.SubagentSpec{Runtime: "gpt"}, `runtime "gpt" is not one of exec, claude-code, openai`},
		{"openai needs model and prompt", provision.SubagentSpec{Runtime: "openai"},
			`subagent "s": the openai runtime needs a model (--model); the openai runtime needs a system prompt (--system-prompt or --prompt-file)`},
		{"codex needs model and prompt", provision.SubagentSpec{Runtime: "codex"},
			`subagent "s": the codex runtime needs a model (--model), one ` + "`codex debug models`" + ` lists; the codex runtime needs a system prompt (--system-prompt or --prompt-file)`},
		{"command only for exec", provision.SubagentSpec{Runtime: "claude-code", SystemPrompt: "p", Command: []string{"x"}},
			"command applies to the exec runtime only, not claude-code"},
		{"prompt too large", provision.SubagentSpec{Runtime: "claude-code", SystemPrompt: strings.Repeat("p", 1<<20+1)}, "system prompt is 1048577 bytes"},
		{"NUL in command", provision.SubagentSpec{Command: []string{"a\x00b"}}, "command contains a NUL byte"},
		{"unknown capability", provision.SubagentSpec{Command: []string{"x"}, Capabilities: []string{"none"}},
			`capability "none" not found; no capabilities are registered`},
		{"bad capability ref", provision.SubagentSpec{Command: []string{"x"}, Capabilities: []string{"a@sha256:zz"}}, `capability reference "a@sha256:zz"`},
		{"credential in prompt", provision.SubagentSpec{Runtime: "claude-code", SystemPrompt: "use\n" + githubToken}, "system_prompt:2: github-token (ghp_...)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.w.PrepareSubagent(ctx, "s", tt.spec, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PrepareSubagent = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	p, err := f.w.PrepareSubagent(ctx, "s", provision.SubagentSpec{Command: []string{"x"}}, nil, nil)
	if err != nil || p.Meta.Runtime != "exec" {
		t.Errorf("default runtime = %+v, %v; want exec", p, err)
	}
}

func TestWriter_SubagentLocalCapabilities(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	pc, err := f.w.PrepareCapability("fresh", capDir(t, map[string]string{"f": "pending"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	local := pc.Digest
	p, err := f.w.PrepareSubagent(ctx, "s", provision.SubagentSpec{Command: []string{"x"}, Capabilities: []string{"fresh"}},
		map[string]digest.Digest{"fresh": local}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]catalog.Pin{{Name: "fresh", Digest: local}}, p.Meta.Capabilities); diff != "" {
		t.Errorf("pins mismatch (-want +got):\n%s", diff)
	}
	// Pinning the pending digest explicitly works as well.
	p, err = f.w.PrepareSubagent(ctx, "s", provision.SubagentSpec{Command: []string{"x"}, Capabilities: []string{"fresh@" + string(local)}},
		map[string]digest.Digest{"fresh": local}, nil)
	if err != nil {
		t.Fatalf("explicit pin of a pending capability: %v", err)
	}
	if diff := cmp.Diff([]catalog.Pin{{Name: "fresh", Digest: local}}, p.Meta.Capabilities); diff != "" {
		t.Errorf("pins mismatch (-want +got):\n%s", diff)
	}
	// A digest said to be of this batch that no PrepareCapability built cannot be checked.
	unknown := digest.Sum([]byte("never prepared"))
	if _, err := f.w.PrepareSubagent(ctx, "s", provision.SubagentSpec{Command: []string{"x"}, Capabilities: []string{"ghost"}},
		map[string]digest.Digest{"ghost": unknown}, nil); err == nil || !strings.Contains(err.Error(), "not prepared") {
		t.Errorf("an unprepared batch capability: got %v", err)
	}
}

// A manifest's batch: capabilities not stored yet, a subagent pinning them. Two of them (or
// one of them and a stored one) overlaying one path are refused at registration, not only
// at accept.
func TestWriter_SubagentOverlayClashInOneBatch(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	_, _ = f.registerCap(t, "stored", capDir(t, map[string]string{
		"capability.yaml": "overlay: [CLAUDE.md]\n", "CLAUDE.md": "stored\n",
	}))
	local := map[string]digest.Digest{}
	for name, files := range map[string]map[string]string{
		"a":     {"capability.yaml": "overlay: [\".claude/**\"]\n", ".claude/settings.json": "{}\n"},
		"b":     {"capability.yaml": "overlay: [\".claude/*.json\"]\n", ".claude/settings.json": "[]\n"},
		"c":     {"capability.yaml": "overlay: [\"**\"]\n", "CLAUDE.md": "c\n"},
		"other": {"capability.yaml": "overlay: [\".claude/**\"]\n", ".claude/other.json": "{}\n"},
	} {
		p, err := f.w.PrepareCapability(name, capDir(t, files), nil)
		if err != nil {
			t.Fatal(err)
		}
		local[name] = p.Digest
	}
	tests := []struct {
		caps []string
		want string
	}{
		{[]string{"a", "b"}, `capabilities "a" and "b" both overlay .claude/settings.json`},
		{[]string{"stored", "c"}, `capabilities "stored" and "c" both overlay CLAUDE.md`},
		{[]string{"a", "other", "stored"}, ""},
	}
	for _, tt := range tests {
		_, err := f.w.PrepareSubagent(ctx, "s", provision.SubagentSpec{Command: []string{"x"}, Capabilities: tt.caps}, local, nil)
		var clash *catalog.OverlayClash
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: got %v, want no clash", tt.caps, err)
		case tt.want != "" && (!errors.As(err, &clash) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: got %v, want an OverlayClash %q", tt.caps, err, tt.want)
		}
	}
}
