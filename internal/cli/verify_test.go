package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
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
	if r.code != cmdutil.ExitOK {
		t.Fatalf("verify: %+v", r)
	}
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if rows[0] != "CHECK\tRESULT\tDETAIL" {
		t.Errorf("the first line is %q, want the header", rows[0])
	}
	rows = rows[1:]
	// key, checkpoint, selection, entries, 3 x (entry, inclusion), tier
	if len(rows) != 11 || !strings.HasPrefix(rows[0], "key\tpass\t") || !strings.HasPrefix(rows[2], "selection\tpass\tsigned by ") ||
		rows[10] != "tier\ttamper-detecting\tsigned by the log's key, checkpoints held locally" {
		t.Errorf("rows:\n%s", r.stdout)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("verify created or touched AGORA_HOME %s (%v)", missing, err)
	}
	r = runAgora(t, env, "verify", bundle)
	if r.code != cmdutil.ExitOK || !strings.Contains(r.stdout, "taken from the bundle") || !strings.Contains(r.stdout, "pass --key") {
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
		res.KeySource != "given" || len(res.Checks) != 10 || res.Bundle != bundle {
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
		{"inclusion proof", tampered, pub, "inclusion 1\tFAIL\t", "1 of 10 checks failed; first: inclusion 1"},
		{"another key", data, otherPub, "key\tFAIL\tbundle key", "checks failed; first: key"},
		{"not a bundle", bytes.Replace(data, []byte(`"format"`), []byte(`"formats"`), 1), pub, "bundle\tFAIL\tmalformed audit bundle", "1 of 1 checks failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.json")
			os.WriteFile(path, tt.content, 0o644)
			r := runAgora(t, env, "verify", path, "--key", tt.key)
			if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, tt.want) || !strings.Contains(r.stderr, tt.stderr) ||
				!strings.Contains(r.stdout, "tier\tnone\t") {
				t.Errorf("got %+v; want exit %d, a row %q and stderr %q", r, cmdutil.ExitCheckFailed, tt.want, tt.stderr)
			}
		})
	}
	if r := runAgora(t, env, "verify", filepath.Join(t.TempDir(), "missing.json")); r.code != cmdutil.ExitError {
		t.Errorf("missing bundle: got code %d, want %d", r.code, cmdutil.ExitError)
	}
	if r := runAgora(t, env, "verify"); r.code != cmdutil.ExitUsage {
		t.Errorf("no argument: got code %d, want %d", r.code, cmdutil.ExitUsage)
	}
}

// TestVerify_SelectionTampering edits a real `agora audit export --kind` the ways that
// verified before selections were signed: one entry deleted with
// selection.count lowered to match, the kind or from_index changed, the bundle relabelled v1
// without its signed selection. Each now exits 5 naming the selection row.
func TestVerify_SelectionTampering(t *testing.T) {
	env := auditHome(t, "")
	bundle := filepath.Join(t.TempDir(), "bundle.json")
	if r := runAgora(t, env, "audit", "export", "--out", bundle, "--kind", "catalog.*"); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	pub := filepath.Join(env["AGORA_HOME"], "keys", "audit.pub")
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(b, sel map[string]any)
		detail string
	}{
		{"entry deleted, count lowered", func(b, sel map[string]any) {
			entries := b["entries"].([]any)
			b["entries"] = append(entries[:1:1], entries[2:]...)
			sel["count"] = sel["count"].(float64) - 1
		}, `the signed selection says "count 3", the bundle says "count 2"`},
		{"kind narrowed", func(b, sel map[string]any) { sel["kind"] = "catalog.capability.register" }, `the signed selection says "kind`},
		{"first entry deleted, from_index raised", func(b, sel map[string]any) {
			b["entries"] = b["entries"].([]any)[1:]
			sel["from_index"], sel["count"] = 1, sel["count"].(float64)-1
		}, `the signed selection says "from_index 0", the bundle says "from_index 1"`},
		{"relabelled v1", func(b, sel map[string]any) {
			b["format"] = "agora-audit-bundle/v1"
			delete(b, "selection_note")
			delete(sel, "end_index")
		}, "format agora-audit-bundle/v1 carries no signed selection, so entries removed from it cannot be detected"},
	}
	env2, _ := standalone(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b map[string]any
			if err := json.Unmarshal(data, &b); err != nil {
				t.Fatal(err)
			}
			tt.edit(b, b["selection"].(map[string]any))
			tampered, _ := json.Marshal(b)
			path := filepath.Join(t.TempDir(), "tampered.json")
			if err := os.WriteFile(path, tampered, 0o600); err != nil {
				t.Fatal(err)
			}
			r := runAgora(t, env2, "verify", path, "--key", pub)
			if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "selection\tFAIL\t"+tt.detail) || !strings.Contains(r.stdout, "tier\tnone\t") {
				t.Errorf("got %+v; want exit %d and a failed selection row %q", r, cmdutil.ExitCheckFailed, tt.detail)
			}
		})
	}
}

// TestVerify_OldBundle: a bundle written before selections were signed is refused with a
// row that says what it lacks, never passed quietly.
func TestVerify_OldBundle(t *testing.T) {
	env, _ := standalone(t)
	r := runAgora(t, env, "verify", "../audit/verify/testdata/bundle-v1.json", "--key", "../audit/verify/testdata/audit.pub",
		"--tsa-ca", "../audit/verify/testdata/tsa-ca.pem")
	if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "selection\tFAIL\tformat agora-audit-bundle/v1 carries no signed selection") ||
		!strings.Contains(r.stderr, "first: selection:") {
		t.Errorf("got %+v; want exit %d naming the missing signed selection", r, cmdutil.ExitCheckFailed)
	}
}

// goldenV3 is the verify package's golden bundle (file, rfc3161 and command anchors) and
// its key and TSA root.
const (
	goldenV3       = "../audit/verify/testdata/bundle-v3.json"
	goldenV3Key    = "../audit/verify/testdata/audit-v3.pub"
	goldenV3TSACA  = "../audit/verify/testdata/tsa-ca-v3.pem"
	goldenRun      = "../audit/verify/testdata/run-bundle-v2.json"
	goldenRunKey   = "../audit/verify/testdata/run-bundle-v2.pub"
	tierRowPrefix  = "tier\t"
	anchoredCopyOK = "anchored copy\tpass\t"
)

// tierRow returns the tier row of verify's table output.
func tierRow(stdout string) string {
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(line, tierRowPrefix) {
			return line
		}
	}
	return ""
}

// TestVerify_Tiers: a command anchor's receipt raises no tier; the auditor's own copy of the
// anchored checkpoint does; the trusted-time line says when its TSA root came from the bundle.
func TestVerify_Tiers(t *testing.T) {
	env, _ := standalone(t)
	data, err := os.ReadFile(goldenV3)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Anchored struct {
			Checkpoint []byte `json:"checkpoint"`
		} `json:"anchored"`
	}
	if err := json.Unmarshal(data, &b); err != nil || len(b.Anchored.Checkpoint) == 0 {
		t.Fatalf("golden bundle: %v", err)
	}
	dir := t.TempDir()
	same, other := filepath.Join(dir, "same"), filepath.Join(dir, "other")
	if err := os.WriteFile(same, b.Anchored.Checkpoint, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(bytes.Clone(b.Anchored.Checkpoint), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		tier string
		rows []string
	}{
		{"CommandReceiptOnly", []string{"--tsa-ca", goldenV3TSACA}, cmdutil.ExitOK,
			"tier\ttrusted-time\tand an RFC 3161 token shows when the checkpoint existed", []string{"claimed, not verifiable offline"}},
		{"TSARootFromBundle", nil, cmdutil.ExitOK,
			"tier\ttrusted-time\tand an RFC 3161 token shows when the checkpoint existed (TSA root taken from the bundle, which its writer chose: pass --tsa-ca with your TSA's CA)", nil},
		{"AuditorsCopy", []string{"--tsa-ca", goldenV3TSACA, "--anchored-checkpoint", same}, cmdutil.ExitOK,
			"tier\ttamper-evident\tand the anchored checkpoint is the copy you fetched from an external anchor", []string{anchoredCopyOK}},
		{"CopyDiffers", []string{"--tsa-ca", goldenV3TSACA, "--anchored-checkpoint", other}, cmdutil.ExitCheckFailed,
			"tier\tnone\ta check failed: the bundle proves nothing", []string{"anchored copy\tFAIL\tnone of the 1 given copies"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAgora(t, env, append([]string{"verify", goldenV3, "--key", goldenV3Key}, tt.args...)...)
			if r.code != tt.code || tierRow(r.stdout) != tt.tier {
				t.Errorf("got code %d tier row %q, want %d and %q\n%s%s", r.code, tierRow(r.stdout), tt.code, tt.tier, r.stdout, r.stderr)
			}
			for _, want := range tt.rows {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, r.stdout)
				}
			}
		})
	}
	r := runAgora(t, env, "verify", goldenV3, "--anchored-checkpoint", filepath.Join(dir, "missing"))
	if r.code != cmdutil.ExitError || !strings.Contains(r.stderr, "read --anchored-checkpoint") {
		t.Errorf("missing copy: got %+v, want exit %d naming the flag", r, cmdutil.ExitError)
	}
}

// TestVerify_RunBundleParts: one part of a run bundle fails on its own, and a run bundle with
// a part under a case-variant key is malformed.
func TestVerify_RunBundleParts(t *testing.T) {
	env, _ := standalone(t)
	data, err := os.ReadFile(goldenRun)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	part, variant := filepath.Join(dir, "part.json"), filepath.Join(dir, "variant.json")
	if err := os.WriteFile(part, top["dispatches"], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(variant, bytes.Replace(data, []byte(`"dispatches": {`), []byte(`"Dispatches": {`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runAgora(t, env, "verify", part, "--key", goldenRunKey)
	if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "selection\tFAIL\tsigned as a part of run ") {
		t.Errorf("part alone: got %+v, want exit %d with a failed selection row", r, cmdutil.ExitCheckFailed)
	}
	r = runAgora(t, env, "verify", variant, "--key", goldenRunKey)
	if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, `bundle`+"\tFAIL\t"+`malformed audit bundle: unknown field "Dispatches" (keys are case-sensitive`) {
		t.Errorf("case-variant key: got %+v, want exit %d with a failed bundle row", r, cmdutil.ExitCheckFailed)
	}
	if r := runAgora(t, env, "verify", goldenRun, "--key", goldenRunKey); r.code != cmdutil.ExitOK {
		t.Errorf("the run bundle itself: %+v", r)
	}
}
