package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli"
)

// exportBundle exports the audit log of a fresh home and returns the bundle's path and the
// home's public key file.
func exportBundle(t *testing.T) (bundle, pub string) {
	t.Helper()
	env := auditHome(t, "")
	bundle = filepath.Join(t.TempDir(), "bundle.json")
	if r := runAgora(t, env, "audit", "export", "--out", bundle); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	return bundle, filepath.Join(env["AGORA_HOME"], "keys", "audit.pub")
}

// standalone is an environment with no usable AGORA_HOME: verify must not need one.
func standalone(t *testing.T) (map[string]string, string) {
	missing := filepath.Join(t.TempDir(), "no-such-home")
	return map[string]string{"AGORA_HOME": missing, "HOME": missing}, missing
}

func TestVerify_Standalone(t *testing.T) {
	bundle, pub := exportBundle(t)
	env, missing := standalone(t)
	r := runAgora(t, env, "verify", bundle, "--key", pub)
	if r.code != cli.ExitOK {
		t.Fatalf("verify: %+v", r)
	}
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	// key, checkpoint, entries, 3 x (entry, inclusion), tier
	if len(rows) != 10 || !strings.HasPrefix(rows[0], "key\tpass\t") || rows[9] != "tier\ttamper-detecting\tsigned by the log's key, checkpoints held locally" {
		t.Errorf("rows:\n%s", r.stdout)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("verify created or touched AGORA_HOME %s (%v)", missing, err)
	}
	r = runAgora(t, env, "verify", bundle)
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "taken from the bundle") || !strings.Contains(r.stdout, "pass --key") {
		t.Errorf("without --key: %+v, want a pass that says the key came from the bundle", r)
	}
}

func TestVerify_JSON(t *testing.T) {
	bundle, pub := exportBundle(t)
	env, _ := standalone(t)
	r := runAgora(t, env, "verify", bundle, "--key", pub, "--output", "json")
	var res struct {
		Bundle    string `json:"bundle"`
		OK        bool   `json:"ok"`
		Tier      string `json:"tier"`
		KeySource string `json:"key_source"`
		Checks    []struct {
			Check  string `json:"check"`
			Item   string `json:"item"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || !res.OK || res.Tier != "tamper-detecting" ||
		res.KeySource != "given" || len(res.Checks) != 9 || res.Bundle != bundle {
		t.Errorf("json: %v %+v", err, r)
	}
}

func TestVerify_FailedChecksExit5(t *testing.T) {
	bundle, pub := exportBundle(t)
	env, _ := standalone(t)
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	json.Unmarshal(data, &b)
	entries := b["entries"].([]any)
	proof := entries[1].(map[string]any)["inclusion_proof"].([]any)
	proof[0] = strings.Repeat("A", 43) + "="
	tampered, _ := json.Marshal(b)
	otherPub := filepath.Join(t.TempDir(), "other.pub")
	os.WriteFile(otherPub, []byte("agora/0000000000000000+00000000+AVhgy0WmipFGVXO13M5IBq0lrZsBkFAR8beT54LKTMR2\n"), 0o644)
	tests := []struct {
		name    string
		content []byte
		key     string
		want    string // a failed row on stdout
		stderr  string
	}{
		{"inclusion proof", tampered, pub, "inclusion 1\tFAIL\t", "1 of 9 checks failed; first: inclusion 1"},
		{"another key", data, otherPub, "key\tFAIL\tbundle key", "checks failed; first: key"},
		{"not a bundle", bytes.Replace(data, []byte(`"format"`), []byte(`"formats"`), 1), pub, "bundle\tFAIL\tmalformed audit bundle", "1 of 1 checks failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.json")
			os.WriteFile(path, tt.content, 0o644)
			r := runAgora(t, env, "verify", path, "--key", tt.key)
			if r.code != cli.ExitCheckFailed || !strings.Contains(r.stdout, tt.want) || !strings.Contains(r.stderr, tt.stderr) ||
				!strings.Contains(r.stdout, "tier\tnone\t") {
				t.Errorf("got %+v; want exit %d, a row %q and stderr %q", r, cli.ExitCheckFailed, tt.want, tt.stderr)
			}
		})
	}
	if r := runAgora(t, env, "verify", filepath.Join(t.TempDir(), "missing.json")); r.code != cli.ExitError {
		t.Errorf("missing bundle: got code %d, want %d", r.code, cli.ExitError)
	}
	if r := runAgora(t, env, "verify"); r.code != cli.ExitUsage {
		t.Errorf("no argument: got code %d, want %d", r.code, cli.ExitUsage)
	}
}
