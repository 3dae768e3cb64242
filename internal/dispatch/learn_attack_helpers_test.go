package dispatch_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
)

// learnAttack is the shell a learn dispatch's model runs to reach what learn never opens:
// agora.db and the audit key under the host's AGORA_HOME, a listing of AGORA_HOME,
// and a host outside egress.learn_hosts (outsideURL). Each attempt prints NAME=EXIT.
func learnAttack(home, outsideURL string) string {
	try := func(name, cmd string) string { return cmd + "; echo \"" + name + "=$?\"" }
	return strings.Join([]string{
		try("db", "cat "+home+"/agora.db"),
		try("key", "cat "+home+"/keys/audit.key"),
		try("home", "ls -la "+home),
		try("other", "curl -sS --fail-with-body --max-time 10 "+outsideURL),
	}, "; ")
}

// wantAttackRefused checks the sandbox's view of learnAttack: every attempt ran and failed.
func wantAttackRefused(t *testing.T, view string) {
	t.Helper()
	for _, name := range []string{"db", "key", "home", "other"} {
		if !strings.Contains(view, name+"=") {
			t.Errorf("the attack %s did not run:\n%s", name, view)
		} else if strings.Contains(view, name+"=0") {
			t.Errorf("the attack %s succeeded:\n%s", name, view)
		}
	}
}

// hostSecrets returns, for the agora home at dir, what the sandbox must never see: the audit
// key and the secret key (as bytes, hex and base64, and each line of them), and agora.db's
// header.
func hostSecrets(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{"agora.db": "SQLite format 3"}
	for _, name := range []string{"audit.key", "secret.key"} {
		b, err := os.ReadFile(filepath.Join(dir, "keys", name))
		if err != nil {
			t.Fatalf("the attack's target: %v", err)
		}
		out[name] = string(b)
		out[name+" (hex)"] = hex.EncodeToString(b)
		out[name+" (base64)"] = base64.StdEncoding.EncodeToString(b)
		for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l = strings.TrimSpace(l); len(l) >= 16 {
				out[fmt.Sprintf("%s line %d", name, i+1)] = l
			}
		}
	}
	return out
}

// wantNoHostBytes fails if any of secrets (from hostSecrets) appears in text, found at where.
func wantNoHostBytes(t *testing.T, secrets map[string]string, where, text string) {
	t.Helper()
	for name, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("the host's %s is in %s", name, where)
		}
	}
}

// wantOutsideRefused checks a learn dispatch's net.connect entries (details): the host
// outside learn_hosts, on port, is on record as refused, and never as allowed.
func wantOutsideRefused(t *testing.T, connects []map[string]any, port string) {
	t.Helper()
	refused := false
	for _, d := range connects {
		if fmt.Sprint(d["port"]) != port {
			continue
		}
		switch d["decision"] {
		case "deny", "denied":
			refused = true
		default:
			t.Errorf("the host outside learn_hosts is on record as %v: %v", d["decision"], d)
		}
	}
	if !refused {
		t.Errorf("no net.connect refusal of the host outside learn_hosts (port %s) is on record: %v", port, connects)
	}
}

// detailsOf returns the details of records.
func detailsOf(records []audit.Record) []map[string]any {
	out := make([]map[string]any, len(records))
	for i, r := range records {
		out[i] = r.Details
	}
	return out
}

// auditedVia returns the details of the entries of kind whose subject is dispatch id, read
// through `agora audit log` of the home h.
func auditedVia(t *testing.T, h *cliHome, kind, id string) []map[string]any {
	t.Helper()
	var all []struct {
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", kind, "-o", "json")), &all); err != nil {
		t.Fatalf("audit log --kind %s: %v", kind, err)
	}
	var out []map[string]any
	for _, a := range all {
		if a.Subject == "dispatch/"+id {
			out = append(out, a.Details)
		}
	}
	return out
}

// learnEgressConf is agora.yaml's egress section for a learn dispatch of a real CLI: the test
// servers on upstreamAddr are reachable (allow_private) and trusted (caFile), and only port
// learnPort of upstreamAddr is a learn host.
func learnEgressConf(caFile, learnPort string) string {
	return fmt.Sprintf("egress:\n  allow_private: [127.0.0.1/32, %s/32]\n  ca_certs: [%s]\n  learn_hosts: [\"%s:%s\"]\n", upstreamAddr, caFile, upstreamAddr, learnPort)
}
