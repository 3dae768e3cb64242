package deploy_test

import (
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/ccimport"
	"github.com/agora-dev/agora/internal/deploy"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// FuzzParseManifest parses arbitrary bytes as agora-manifest.yaml: it must never panic, every
// failure is located, and an accepted manifest has version 1, valid unique names, exactly
// one source per secret, and binds only its secrets, to valid hosts and headers.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(exampleManifest))
	f.Add([]byte("version: 1\n"))
	f.Add([]byte("version: 2\ncapabilities: [{name: a}, {name: a, from: x}]\n"))
	f.Add([]byte("version: 1\nenvs:\n  - name: e\n    secrets: {K: {from_env: A, from_file: b}}\n"))
	f.Add([]byte("version: 1\nsubagents:\n  - {name: s, from: f.yaml, model: m}\n"))
	f.Add([]byte("version: &v 1\nx: *v\n"))
	f.Add([]byte("version: 1\nworkspaces:\n  - {name: app, repo: /srv/app, revisions: [main, \"release/*\"], default_revision: main}\n"))
	f.Add([]byte("version: 1\nworkspaces:\n  - {name: app, revisions: [\"main~1\"]}\n  - {name: app, repo: x}\n"))
	f.Add([]byte("version: 1\nenvs:\n  - name: e\n    secrets: {T: {from_env: T}}\n    bind: {T: {hosts: [api.github.com, \"*.example.com\", 192.0.2.1, \"::1\"], headers: [x-api-key]}}\n"))
	f.Add([]byte("version: 1\nenvs:\n  - name: e\n    values: {V: x}\n    secrets: {T: {from_env: T}}\n    bind: {V: {hosts: [a.example]}, N: {hosts: []}, T: {hosts: [\"A.example:1\", 127.1], headers: [Host, Proxy-X]}}\n"))
	f.Add([]byte("version: 1\nimport: [.claude/agents, {from: more, default_tools: \"Read, Bash(go test:*)\"}]\n"))
	f.Add([]byte("version: 1\nimport:\n  - {default_tools: \"WebSearch\"}\n  - [x]\n  - ~\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m, _, err := deploy.Parse("m.yaml", src)
		if err != nil {
			var es strictyaml.Errors
			if !errors.As(err, &es) && len(src) <= deploy.MaxSize {
				t.Fatalf("error is %T, want strictyaml.Errors: %v", err, err)
			}
			for _, e := range es {
				if e.Line < 0 || e.File != "m.yaml" || e.Msg == "" {
					t.Fatalf("malformed error %+v", e)
				}
			}
			return
		}
		if m.Version != 1 {
			t.Fatalf("accepted version %d", m.Version)
		}
		names := map[string]bool{}
		check := func(kind catalog.Kind, name string) {
			if err := catalog.CheckName(kind, name); err != nil || names[string(kind)+"/"+name] {
				t.Fatalf("accepted %s name %q (valid: %v, duplicate: %v)", kind, name, err, names[string(kind)+"/"+name])
			}
			names[string(kind)+"/"+name] = true
		}
		for _, c := range m.Capabilities {
			check(catalog.KindCapability, c.Name)
			if c.From == "" {
				t.Fatalf("accepted capability %q without from", c.Name)
			}
		}
		for _, s := range m.Subagents {
			check(catalog.KindSubagent, s.Name)
		}
		for _, w := range m.Workspaces {
			check(catalog.KindWorkspace, w.Name)
			if w.Repo == "" || len(w.Revisions) == 0 {
				t.Fatalf("accepted workspace %q without a repo or revisions", w.Name)
			}
			for _, r := range w.Revisions {
				if err := catalog.CheckRevisionPattern(r); err != nil {
					t.Fatalf("accepted workspace %q with pattern %q: %v", w.Name, r, err)
				}
			}
		}
		for _, im := range m.Import {
			if im.From == "" {
				t.Fatalf("accepted an import without from: %+v", im)
			}
			if im.DefaultTools != "" {
				if _, err := ccimport.ParseDefaultTools(im.DefaultTools); err != nil {
					t.Fatalf("accepted default_tools %q: %v", im.DefaultTools, err)
				}
			}
		}
		for _, e := range m.Envs {
			check(catalog.KindEnv, e.Name)
			for k, s := range e.Secrets {
				if (s.FromEnv == "") == (s.FromFile == "") {
					t.Fatalf("accepted secret %s with %+v", k, s)
				}
			}
			for k, b := range e.Bind {
				if _, ok := e.Secrets[k]; !ok || len(b.Hosts) == 0 {
					t.Fatalf("accepted bind %s %+v (a secret: %v)", k, b, ok)
				}
				for _, h := range b.Hosts {
					if err := catalog.CheckBindingHost(h); err != nil {
						t.Fatalf("accepted bind %s host: %v", k, err)
					}
				}
				for _, h := range b.Headers {
					if err := catalog.CheckBindingHeader(catalog.CanonicalHeader(h)); err != nil {
						t.Fatalf("accepted bind %s header: %v", k, err)
					}
				}
			}
		}
	})
}
