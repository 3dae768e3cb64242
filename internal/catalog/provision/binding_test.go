package provision_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

func (f *fixture) registerEnvSpec(t testing.TB, name string, spec provision.EnvSpec) (provision.Change, catalog.Version) {
	t.Helper()
	p, err := f.w.PrepareEnvSpec(name, spec, nil)
	if err != nil {
		t.Fatalf("PrepareEnvSpec %s: %v", name, err)
	}
	c, v, err := f.w.Register(t.Context(), "tester", "register", p)
	if err != nil {
		t.Fatalf("Register %s: %v", name, err)
	}
	return c, v
}

func TestWriter_EnvBindings(t *testing.T) {
	f := newFixture(t)
	canary := []byte("canary-Bound-Value-5d1e")
	secrets := map[string][]byte{"GITHUB_TOKEN": canary}
	spec := provision.EnvSpec{
		Values: map[string]string{"LOG": "debug"}, Secrets: secrets,
		Bindings: map[string]catalog.Binding{"GITHUB_TOKEN": {
			Hosts: []string{"github.com", "api.github.com", "github.com"}, Headers: []string{"x-api-key"},
		}},
	}
	c, v1 := f.registerEnvSpec(t, "gh", spec)
	want := map[string]catalog.Binding{"GITHUB_TOKEN": {Hosts: []string{"api.github.com", "github.com"}, Headers: []string{"X-Api-Key"}}}
	if c.Action != catalog.ActionCreate {
		t.Errorf("first registration = %s, want create", c.Action)
	}
	if diff := cmp.Diff(want, c.Bindings); diff != "" {
		t.Errorf("Change.Bindings mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, v1.Meta.Bindings); diff != "" {
		t.Errorf("Meta.Bindings mismatch (-want +got):\n%s", diff)
	}
	content, err := f.r.Content(v1)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseEnvDoc(content)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, doc.Bindings); diff != "" {
		t.Errorf("document bindings mismatch (-want +got):\n%s", diff)
	}
	if bytes.Contains(content, canary) {
		t.Errorf("the document holds the secret: %s", content)
	}
	var entry string
	if err := f.h.DB.SQL().QueryRow(`SELECT entry FROM audit_entries ORDER BY seq DESC LIMIT 1`).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(entry, `"bindings":{"GITHUB_TOKEN":{"headers":["X-Api-Key"],"hosts":["api.github.com","github.com"]}}`) {
		t.Errorf("audit entry %s does not record the binding", entry)
	}

	// The same bindings, written in another order and case: the same version.
	spec.Bindings = map[string]catalog.Binding{"GITHUB_TOKEN": {Hosts: []string{"api.github.com", "github.com"}, Headers: []string{"X-Api-Key", "x-api-key"}}}
	if c, v := f.registerEnvSpec(t, "gh", spec); c.Action != catalog.ActionUnchanged || v.Digest != v1.Digest {
		t.Errorf("same bindings again = %s %s, want unchanged %s", c.Action, v.Digest, v1.Digest)
	}

	// Other hosts: a new version, and the change says what it replaced.
	spec.Bindings = map[string]catalog.Binding{"GITHUB_TOKEN": {Hosts: []string{"api.github.com"}}}
	c, v2 := f.registerEnvSpec(t, "gh", spec)
	if c.Action != catalog.ActionUpdate || v2.Digest == v1.Digest {
		t.Errorf("other hosts = %s %s, want an update", c.Action, v2.Digest)
	}
	if diff := cmp.Diff(want, c.PreviousBindings); diff != "" {
		t.Errorf("Change.PreviousBindings mismatch (-want +got):\n%s", diff)
	}

	// No bindings: exactly the bundle PrepareEnv makes, so bundles registered before bindings
	// existed keep their digest.
	spec.Bindings = nil
	c, v3 := f.registerEnvSpec(t, "gh", spec)
	if c.Action != catalog.ActionUpdate || c.Bindings != nil || len(c.PreviousBindings) != 1 {
		t.Errorf("unbinding = %s %v %v, want an update with previous bindings only", c.Action, c.Bindings, c.PreviousBindings)
	}
	p, err := f.w.PrepareEnv("gh", spec.Values, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != v3.Digest {
		t.Errorf("PrepareEnv digest %s, unbound PrepareEnvSpec %s: want the same", p.Digest, v3.Digest)
	}
	if hits := grepHome(t, f.h.Dir, canary); len(hits) != 0 {
		t.Errorf("secret found in %v", hits)
	}
}

func TestWriter_PrepareEnvSpecRefusesBindings(t *testing.T) {
	f := newFixture(t)
	secrets := map[string][]byte{"TOKEN": []byte("s3cret-value-0123"), "OTHER": []byte("s3cret-value-4567"), "PIN": []byte("s3cret")}
	tests := []struct {
		name     string
		bindings map[string]catalog.Binding
		want     string
	}{
		{"plain value", map[string]catalog.Binding{"LOG": {Hosts: []string{"a.example"}}},
			"binding LOG: LOG is a plain value, not a secret; only a secret can be bound to hosts"},
		{"unknown key", map[string]catalog.Binding{"NOPE": {Hosts: []string{"a.example"}}},
			"binding NOPE: the bundle has no secret NOPE (its secrets: OTHER, PIN, TOKEN)"},
		{"too short to mask", map[string]catalog.Binding{"PIN": {Hosts: []string{"a.example"}}},
			"binding PIN: the secret is shorter than 8 bytes, too short to mask"},
		{"no hosts", map[string]catalog.Binding{"TOKEN": {}}, "binding TOKEN: no hosts"},
		{"bad host", map[string]catalog.Binding{"TOKEN": {Hosts: []string{"https://a.example/x"}}},
			`binding TOKEN: host "https://a.example/x": want a lowercase host name`},
		{"framing header", map[string]catalog.Binding{"TOKEN": {Hosts: []string{"a.example"}, Headers: []string{"transfer-encoding"}}},
			`binding TOKEN: header "Transfer-Encoding" cannot be bound`},
		{"several at once", map[string]catalog.Binding{"TOKEN": {Hosts: []string{"A.example"}}, "OTHER": {Hosts: []string{"a.example:0"}}},
			`env bundle "e": binding OTHER: host "a.example:0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.w.PrepareEnvSpec("e", provision.EnvSpec{
				Values: map[string]string{"LOG": "debug"}, Secrets: secrets, Bindings: tt.bindings,
			}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PrepareEnvSpec = %v, want an error containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q holds a secret value", err)
			}
		})
	}
}

// TestWriter_PlanShowsBindings: a manifest's plan (Plan, before Apply) carries the bindings
// each env change leaves and the ones it replaces.
func TestWriter_PlanShowsBindings(t *testing.T) {
	f := newFixture(t)
	secrets := map[string][]byte{"T": []byte("value-0123456789")}
	f.registerEnvSpec(t, "e", provision.EnvSpec{Secrets: secrets, Bindings: map[string]catalog.Binding{"T": {Hosts: []string{"a.example"}}}})
	p, err := f.w.PrepareEnvSpec("e", provision.EnvSpec{Secrets: secrets, Bindings: map[string]catalog.Binding{"T": {Hosts: []string{"b.example"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := f.w.Plan(t.Context(), []*provision.Pending{p}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []provision.Change{{
		Action: catalog.ActionUpdate, Kind: catalog.KindEnv, Name: "e", Digest: p.Digest, Previous: changes[0].Previous,
		Bindings:         map[string]catalog.Binding{"T": {Hosts: []string{"b.example"}, Headers: []string{}}},
		PreviousBindings: map[string]catalog.Binding{"T": {Hosts: []string{"a.example"}, Headers: []string{}}},
	}}
	if diff := cmp.Diff(want, changes, cmp.AllowUnexported(provision.Change{}), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".pending"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("Plan mismatch (-want +got):\n%s", diff)
	}
	done, err := f.w.Apply(t.Context(), "tester", "register", changes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].PreviousBindings["T"].Hosts[0] != "a.example" {
		t.Errorf("Apply's changes = %+v, want the previous bindings worked out again", done)
	}
}
