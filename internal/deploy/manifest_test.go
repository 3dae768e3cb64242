package deploy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/deploy"
	"github.com/agora-dev/agora/internal/strictyaml"
)

func TestParse_Valid(t *testing.T) {
	src := `version: 1
capabilities:
  - name: repo-tools
    from: caps/repo-tools
    allow_credential_patterns: [jwt]
subagents:
  - name: reviewer
    runtime: claude-code
    system_prompt: You review code.
    capabilities: [repo-tools]
  - name: from-file
    from: subagents/x.yaml
envs:
  - name: deploy
    values: {REGION: eu-west-1}
    secrets:
      TOKEN: {from_env: DEPLOY_TOKEN}
      KEY: {from_file: secrets/key.txt}
`
	m, pos, err := deploy.Parse("agora-manifest.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &deploy.Manifest{
		Version:      1,
		Capabilities: []deploy.Capability{{Name: "repo-tools", From: "caps/repo-tools", AllowCredentialPatterns: []string{"jwt"}}},
		Subagents: []deploy.Subagent{
			{Name: "reviewer", Runtime: "claude-code", SystemPrompt: "You review code.", Capabilities: []string{"repo-tools"}},
			{Name: "from-file", From: "subagents/x.yaml"},
		},
		Envs: []deploy.Env{{
			Name:   "deploy",
			Values: map[string]string{"REGION": "eu-west-1"},
			Secrets: map[string]deploy.SecretSource{
				"TOKEN": {FromEnv: "DEPLOY_TOKEN"},
				"KEY":   {FromFile: "secrets/key.txt"},
			},
		}},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
	if got := pos.Line("envs[0].secrets.KEY"); got != 18 {
		t.Errorf("line of envs[0].secrets.KEY = %d, want 18", got)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // each error as file:line: path: message
	}{
		{
			name: "version must be 1",
			src:  "version: 2\n",
			want: []string{"m.yaml:1: version: want version: 1, got 2"},
		},
		{
			name: "missing version",
			src:  "capabilities: []\n",
			want: []string{"m.yaml:1: version: want version: 1, got 0"},
		},
		{
			name: "unknown field",
			src:  "version: 1\ncapabilities:\n  - name: a\n    form: dir\n",
			want: []string{
				"m.yaml:3: capabilities[0]: from (the capability's directory) is required",
				`m.yaml:4: capabilities[0].form: unknown field "form"; known fields: allow_credential_patterns, from, name`,
			},
		},
		{
			name: "decode errors all at once",
			src:  "version: 1\nenvs:\n  - name: e\n    values: [a]\n  - name: f\n    secrets:\n      K: {from_envv: X}\nsubagents: {}\n",
			want: []string{
				"m.yaml:4: envs[0].values: want a mapping, got a list",
				`m.yaml:7: envs[1].secrets.K.from_envv: unknown field "from_envv"; known fields: from_env, from_file`,
				"m.yaml:7: envs[1].secrets.K: want exactly one of from_env or from_file",
				"m.yaml:8: subagents: want a list, got a mapping",
			},
		},
		{
			name: "checks all at once",
			src: `version: 1
capabilities:
  - name: tools
    from: a
  - name: tools
    from: b
  - name: Bad_Name
    from: c
  - name: nofrom
subagents:
  - name: s
    from: s.yaml
    model: m
  - name: p
    system_prompt: x
    prompt_file: p.txt
  - name: tools
envs:
  - name: e
    secrets:
      BOTH: {from_env: A, from_file: b}
      NONE: {}
`,
			want: []string{
				`m.yaml:5: capabilities[1].name: capability "tools" is declared twice (first at capabilities[0])`,
				`m.yaml:7: capabilities[2].name: invalid capability name "Bad_Name": use 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit`,
				"m.yaml:9: capabilities[3]: from (the capability's directory) is required",
				"m.yaml:12: subagents[0].from: from names a subagent file; declare the other fields there, not here",
				"m.yaml:16: subagents[1].prompt_file: system_prompt and prompt_file cannot both be set",
				"m.yaml:21: envs[0].secrets.BOTH: want exactly one of from_env or from_file",
				"m.yaml:22: envs[0].secrets.NONE: want exactly one of from_env or from_file",
			},
		},
		{
			name: "duplicate env names",
			src:  "version: 1\nenvs:\n  - name: e\n  - name: e\n",
			want: []string{`m.yaml:4: envs[1].name: env bundle "e" is declared twice (first at envs[0])`},
		},
		{
			name: "secret value inline is not a field",
			src:  "version: 1\nenvs:\n  - name: e\n    secrets:\n      K: hunter2\n",
			want: []string{
				`m.yaml:5: envs[0].secrets.K: want a mapping, got "hunter2"`,
				"m.yaml:5: envs[0].secrets.K: want exactly one of from_env or from_file",
			},
		},
		{
			name: "invalid YAML",
			src:  "version: 1\ncapabilities: [\n",
			want: []string{"m.yaml:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, err := deploy.Parse("m.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse = %+v, want errors", m)
			}
			var es strictyaml.Errors
			if !errors.As(err, &es) {
				t.Fatalf("Parse error is %T, want strictyaml.Errors", err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Error())
			}
			if tt.name == "invalid YAML" {
				if len(got) != 1 || !strings.HasPrefix(got[0], "m.yaml:") || !strings.Contains(got[0], "invalid YAML") {
					t.Errorf("Parse errors = %q", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParse_TooLarge(t *testing.T) {
	src := "version: 1\n# " + strings.Repeat("x", deploy.MaxSize) + "\n"
	if _, _, err := deploy.Parse("m.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Parse of an oversized manifest = %v", err)
	}
}
