package provision_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

// githubToken is built at run time so no credential-shaped literal sits in the source.
var githubToken = "ghp" + "_" + strings.Repeat("a1B2", 9)

// grepHome reports every file under dir that contains needle.
func grepHome(t testing.TB, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func TestWriter_EnvSecretsSealed(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	canary := []byte("canary-Secret-Value-7f3a9c")
	_, v1 := f.registerEnv(t, "deploy", map[string]string{"REGION": "eu-west-1"}, map[string][]byte{"TOKEN": canary})

	if diff := cmp.Diff([]string{"REGION"}, v1.Meta.ValueKeys); diff != "" {
		t.Errorf("ValueKeys mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"TOKEN"}, v1.Meta.SecretKeys); diff != "" {
		t.Errorf("SecretKeys mismatch (-want +got):\n%s", diff)
	}
	content, err := f.r.Content(v1)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseEnvDoc(content)
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Secrets["TOKEN"]
	if ref == "" || strings.Contains(ref, string(canary)) || bytes.Contains(content, canary) {
		t.Errorf("env document holds more than a reference: %s", content)
	}
	if diff := cmp.Diff(map[string]string{"REGION": "eu-west-1"}, doc.Values); diff != "" {
		t.Errorf("values mismatch (-want +got):\n%s", diff)
	}
	// The sealed row opens to the value under the home's key, and is not the value.
	var sealed []byte
	if err := f.h.DB.SQL().QueryRow(`SELECT sealed FROM sealed_secrets WHERE ref = ?`, ref).Scan(&sealed); err != nil {
		t.Fatalf("sealed secret for %s: %v", ref, err)
	}
	if bytes.Contains(sealed, canary) {
		t.Errorf("sealed_secrets holds the plaintext")
	}
	sealer, err := f.h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sealer.Open(ref, sealed); err != nil || !bytes.Equal(got, canary) {
		t.Errorf("opening the sealed secret = %q, %v", got, err)
	}
	if got, err := f.r.Sealed(ctx, ref); err != nil || !bytes.Equal(got, sealed) {
		t.Errorf("Reader.Sealed = %v", err)
	}

	// Re-registering the same secret is a no-op; a rotated one is a new version.
	c, v := f.registerEnv(t, "deploy", map[string]string{"REGION": "eu-west-1"}, map[string][]byte{"TOKEN": canary})
	if c.Action != catalog.ActionUnchanged || v.Digest != v1.Digest {
		t.Errorf("same secret again = %s %s, want unchanged", c.Action, v.Digest)
	}
	rotated := []byte("canary-Secret-Value-rotated")
	c, v2 := f.registerEnv(t, "deploy", map[string]string{"REGION": "eu-west-1"}, map[string][]byte{"TOKEN": rotated})
	if c.Action != catalog.ActionUpdate || v2.Digest == v1.Digest {
		t.Errorf("rotated secret = %s %s, want an update", c.Action, v2.Digest)
	}
	if n := f.count(t, `SELECT COUNT(*) FROM sealed_secrets`); n != 2 {
		t.Errorf("sealed secrets = %d, want 2", n)
	}
	// The same value under another bundle or key has another ref, so refs reveal no equality.
	_, other := f.registerEnv(t, "other", nil, map[string][]byte{"TOKEN": canary})
	otherContent, _ := f.r.Content(other)
	otherDoc, _ := catalog.ParseEnvDoc(otherContent)
	if otherDoc.Secrets["TOKEN"] == ref {
		t.Errorf("two bundles share a secret ref")
	}

	// No plaintext anywhere under AGORA_HOME: database, WAL, blobs, keys.
	for _, secret := range [][]byte{canary, rotated} {
		if hits := grepHome(t, f.h.Dir, secret); len(hits) != 0 {
			t.Errorf("secret found in %v", hits)
		}
	}
}

func TestWriter_PrepareEnvRefuses(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name    string
		values  map[string]string
		secrets map[string][]byte
		want    string
	}{
		{"bad key", map[string]string{"1BAD": "x"}, nil, `key "1BAD" is not a valid environment variable name`},
		{"reserved prefix", map[string]string{"AGORA_HOME": "x"}, nil, `the AGORA_ prefix is reserved`},
		{"value and secret", map[string]string{"K": "x"}, map[string][]byte{"K": []byte("y")}, `key "K" is both a value and a secret`},
		{"empty secret", nil, map[string][]byte{"S": {}}, "secret S is empty"},
		{"big value", map[string]string{"V": strings.Repeat("x", 64<<10+1)}, nil, "value V is over 65536 bytes"},
		{"several at once", map[string]string{"a-b": "x", "AGORA_X": "y"}, map[string][]byte{"S": nil},
			`env bundle "e": key "AGORA_X": the AGORA_ prefix is reserved for agora itself; key "a-b" is not a valid environment variable name; secret S is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.w.PrepareEnv("e", tt.values, tt.secrets, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PrepareEnv = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := f.w.PrepareEnv("Bad", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "invalid env bundle name") {
		t.Errorf("PrepareEnv(bad name) = %v", err)
	}
	if _, err := f.w.PrepareEnv("e", nil, nil, []string{"no-such-pattern"}); err == nil || !strings.Contains(err.Error(), "no-such-pattern") {
		t.Errorf("PrepareEnv with an unknown allow pattern = %v", err)
	}
}

func TestWriter_EnvValueCredential(t *testing.T) {
	f := newFixture(t)
	_, err := f.w.PrepareEnv("e", map[string]string{"OK": "fine", "GH": "first line\nx " + githubToken + "\n"}, nil, nil)
	var ce *provision.CredentialError
	if !errors.As(err, &ce) {
		t.Fatalf("PrepareEnv with a token in a value = %v, want a CredentialError", err)
	}
	want := []provision.CredentialFinding{{Where: "value GH", Line: 2, Pattern: "github-token", Preview: "ghp_..."}}
	if diff := cmp.Diff(want, ce.Findings); diff != "" {
		t.Errorf("findings mismatch (-want +got):\n%s", diff)
	}
	if msg := err.Error(); strings.Contains(msg, githubToken[:8]) || !strings.Contains(msg, "value GH:2: github-token (ghp_...)") {
		t.Errorf("error %q leaks the token or lacks its location", msg)
	}
	if !strings.Contains(ce.Hint(), "--allow-credential-pattern github-token") {
		t.Errorf("hint %q does not name the opt-out", ce.Hint())
	}
	// Secrets are not scanned: a token is exactly what a secret is for.
	if _, err := f.w.PrepareEnv("e", nil, map[string][]byte{"GH": []byte(githubToken)}, nil); err != nil {
		t.Errorf("PrepareEnv with a token as a secret = %v", err)
	}
	// The opt-out is recorded on the version and in the audit entry.
	p, err := f.w.PrepareEnv("e", map[string]string{"GH": githubToken}, nil, []string{"github-token"})
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := f.w.Register(t.Context(), "tester", "register", p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"github-token"}, v.Meta.AllowedCredentialPatterns); diff != "" {
		t.Errorf("AllowedCredentialPatterns mismatch (-want +got):\n%s", diff)
	}
	var entry string
	if err := f.h.DB.SQL().QueryRow(`SELECT entry FROM audit_entries ORDER BY seq DESC LIMIT 1`).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(entry, `"allowed_credential_patterns":["github-token"]`) {
		t.Errorf("audit entry %s does not record the opt-out", entry)
	}
}

func TestWriter_CapabilityCredential(t *testing.T) {
	f := newFixture(t)
	dir := capDir(t, map[string]string{
		"README.md":        "hello\n",
		"config/deploy.sh": "#!/bin/sh\n\n\nexport T=" + githubToken + "\n",
		"bin/blob.bin":     "\x00\x01\x02\n" + "AKIA" + "ABCDEFGHIJKLMNOP" + "\x00",
	})
	_, err := f.w.PrepareCapability("leaky", dir, nil)
	var ce *provision.CredentialError
	if !errors.As(err, &ce) {
		t.Fatalf("PrepareCapability with tokens = %v, want a CredentialError", err)
	}
	want := []provision.CredentialFinding{
		{Where: "bin/blob.bin", Line: 2, Pattern: "aws-access-key", Preview: "AKIA..."},
		{Where: "config/deploy.sh", Line: 4, Pattern: "github-token", Preview: "ghp_..."},
	}
	if diff := cmp.Diff(want, ce.Findings); diff != "" {
		t.Errorf("findings mismatch (-want +got):\n%s", diff)
	}
	if strings.Contains(err.Error(), githubToken[:8]) || strings.Contains(err.Error(), "ABCDEFGH") {
		t.Errorf("error %q shows more than the first characters", err)
	}
	// Allowing one pattern still refuses the other.
	_, err = f.w.PrepareCapability("leaky", dir, []string{"github-token"})
	if !errors.As(err, &ce) || len(ce.Findings) != 1 || ce.Findings[0].Pattern != "aws-access-key" {
		t.Errorf("with github-token allowed = %v, want only the AWS finding", err)
	}
	p, err := f.w.PrepareCapability("leaky", dir, []string{"github-token", "aws-access-key"})
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := f.w.Register(t.Context(), "tester", "register", p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"github-token", "aws-access-key"}, v.Meta.AllowedCredentialPatterns); diff != "" {
		t.Errorf("AllowedCredentialPatterns mismatch (-want +got):\n%s", diff)
	}
}

func TestWriter_PrepareCapabilityRefuses(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"bad grants", func(t *testing.T) string {
			return capDir(t, map[string]string{"capability.yaml": "tools: [nope]\nnetwork: wide\n"})
		}, "capability.yaml:1: tools[0]: unknown tool \"nope\""},
		{"escaping symlink", func(t *testing.T) string {
			d := capDir(t, map[string]string{"a": "a"})
			os.Symlink("../../etc/passwd", filepath.Join(d, "l"))
			return d
		}, "symlink points outside the capability"},
		{"missing dir", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.w.PrepareCapability("c", tt.dir(t), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PrepareCapability = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := f.w.PrepareCapability("Bad", t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "invalid capability name") {
		t.Errorf("PrepareCapability(bad name) = %v", err)
	}
}

func TestWriter_CapabilitySizeLimit(t *testing.T) {
	h := newFixture(t).h
	sealer, err := h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	w := provision.New(h.DB, h.Blobs, sealer, audit.New(nil), provision.Options{CapabilityMaxSize: 1000})
	dir := capDir(t, map[string]string{"a": strings.Repeat("a", 800), "b": strings.Repeat("b", 800)})
	_, err = w.PrepareCapability("big", dir, nil)
	var se *catalog.SizeError
	if !errors.As(err, &se) || se.Size != 1600 || se.Limit != 1000 {
		t.Errorf("PrepareCapability over the limit = %v, want SizeError 1600 > 1000", err)
	}
}
