package deploy_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/deploy"
	"github.com/agora-dev/agora/internal/strictyaml"
)

const boundManifest = `version: 1
envs:
  - name: gh
    values: {LOG: debug}
    secrets:
      GITHUB_TOKEN: {from_env: GH}
    bind:
      GITHUB_TOKEN:
        hosts: [github.com, api.github.com]
        headers: [x-api-key]
`

func TestParse_Bind(t *testing.T) {
	m, pos, err := deploy.Parse("m.yaml", []byte(boundManifest))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := map[string]deploy.Binding{"GITHUB_TOKEN": {Hosts: []string{"github.com", "api.github.com"}, Headers: []string{"x-api-key"}}}
	if diff := cmp.Diff(want, m.Envs[0].Bind); diff != "" {
		t.Errorf("bind mismatch (-want +got):\n%s", diff)
	}
	if got := pos.Line("envs[0].bind.GITHUB_TOKEN.hosts"); got != 9 {
		t.Errorf("line of envs[0].bind.GITHUB_TOKEN.hosts = %d, want 9", got)
	}
}

func TestParse_BindErrors(t *testing.T) {
	src := `version: 1
envs:
  - name: e
    values: {LOG: debug}
    secrets:
      T: {from_env: T}
    bind:
      LOG: {hosts: [a.example]}
      NOPE: {hosts: [a.example]}
      T:
        hosts: [API.example, "a.example:0", "https://b.example/x", 127.1]
        headers: [Host, Proxy-Authorization, "X Key"]
        header: [X-Api-Key]
  - name: f
    secrets:
      T: {from_env: T}
    bind:
      T: {}
`
	_, _, err := deploy.Parse("m.yaml", []byte(src))
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse = %v, want strictyaml.Errors", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Error())
	}
	const wantHost = "want a lowercase host name such as api.example.com, *.example.com for its subdomains, or an IP address such as 192.0.2.1, with :PORT when the port is not 443 (HTTPS); no scheme or path"
	want := []string{
		"m.yaml:8: envs[0].bind.LOG: LOG is a plain value (values:), not a secret; only a secret can be bound to hosts",
		"m.yaml:9: envs[0].bind.NOPE: NOPE is not a secret of this env bundle (secrets: T); declare it under secrets: first",
		`m.yaml:11: envs[0].bind.T.hosts[0]: host "API.example": write it as api.example (lower case, an address in canonical form)`,
		`m.yaml:11: envs[0].bind.T.hosts[1]: host "a.example:0": port "0": want a number from 1 to 65535`,
		`m.yaml:11: envs[0].bind.T.hosts[2]: host "https://b.example/x": ` + wantHost,
		`m.yaml:11: envs[0].bind.T.hosts[3]: host "127.1": reads as an IP address but is not one in canonical form; ` + wantHost,
		`m.yaml:12: envs[0].bind.T.headers[0]: header "Host" cannot be bound: Host names the server`,
		`m.yaml:12: envs[0].bind.T.headers[1]: header "Proxy-Authorization" cannot be bound: Proxy- headers are for the proxy, not the service`,
		`m.yaml:12: envs[0].bind.T.headers[2]: header "X Key": want a header name such as X-Api-Key (letters, digits and -, at most 128 characters)`,
		`m.yaml:13: envs[0].bind.T.header: unknown field "header"; known fields: headers, hosts`,
		"m.yaml:18: envs[1].bind.T: hosts (at least one host the secret may be sent to) is required",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse errors mismatch (-want +got):\n%s", diff)
	}
}

// TestSource_ApplyBindings: apply carries a manifest's bind into the env bundle; the same bind
// again is unchanged, another bind is a new version whose change names the old one.
func TestSource_ApplyBindings(t *testing.T) {
	_, w := newWriter(t)
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "agora-manifest.yaml")
	env := getenv(map[string]string{"GH": "gh-secret-value-0123"})
	apply := func(t *testing.T, manifest string) []catalog.Binding {
		t.Helper()
		writeTree(t, dir, map[string]string{"agora-manifest.yaml": manifest})
		_, pendings, err := deploy.Check(ctx, path, w, env)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		changes, err := w.Plan(ctx, pendings, false)
		if err != nil {
			t.Fatal(err)
		}
		done, err := w.Apply(ctx, "ci", "register", changes, nil)
		if err != nil || len(done) != 1 {
			t.Fatalf("Apply = %v, %v", done, err)
		}
		t.Logf("%s %s", done[0].Action, done[0].Digest)
		return []catalog.Binding{done[0].PreviousBindings["GITHUB_TOKEN"], done[0].Bindings["GITHUB_TOKEN"]}
	}
	got := apply(t, boundManifest)
	want := catalog.Binding{Hosts: []string{"api.github.com", "github.com"}, Headers: []string{"X-Api-Key"}}
	if diff := cmp.Diff([]catalog.Binding{{}, want}, got); diff != "" {
		t.Errorf("first apply bindings (-want +got):\n%s", diff)
	}
	v1, err := w.Reader().Resolve(ctx, catalog.KindEnv, "gh")
	if err != nil {
		t.Fatal(err)
	}
	content, _ := w.Reader().Content(v1)
	doc, err := catalog.ParseEnvDoc(content)
	if err != nil || !cmp.Equal(doc.Bindings["GITHUB_TOKEN"], want) {
		t.Errorf("stored bindings = %+v, %v; want %+v", doc.Bindings, err, want)
	}

	apply(t, boundManifest)
	if v, _ := w.Reader().Resolve(ctx, catalog.KindEnv, "gh"); v.Digest != v1.Digest {
		t.Errorf("the same manifest again made version %s, want %s", v.Digest, v1.Digest)
	}

	other := boundManifest[:len(boundManifest)-len("        hosts: [github.com, api.github.com]\n        headers: [x-api-key]\n")] +
		"        hosts: [api.github.com]\n"
	got = apply(t, other)
	if diff := cmp.Diff([]catalog.Binding{want, {Hosts: []string{"api.github.com"}, Headers: []string{}}}, got); diff != "" {
		t.Errorf("rebinding (-want +got):\n%s", diff)
	}
	if v, _ := w.Reader().Resolve(ctx, catalog.KindEnv, "gh"); v.Digest == v1.Digest {
		t.Errorf("another bind kept version %s", v.Digest)
	}
}
