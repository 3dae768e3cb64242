package mcpserver_test

import (
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCanary_AgentControlledStrings: an agent that writes the
// secret into every string it controls (an output's name, a file name in the patch, the
// question, its options and partial state, stderr, a field name that a failure detail
// quotes) must not get it stored or shown anywhere: CLI describe (text and JSON), MCP
// describe, the audit export, `dispatch outputs --to`, and every byte under AGORA_HOME.
func TestCanary_AgentControlledStrings(t *testing.T) {
	requireSandbox(t)
	home := filepath.Join(t.TempDir(), "home")
	src, err := filepath.Abs("testdata/canary/agora-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	agora(t, home, nil, "init")
	agora(t, home, []string{"DEMO_TOKEN=" + secretCanary}, "apply", "-f", src)

	run := func(subagent string, wantCode int) string {
		t.Helper()
		cmd := exec.Command(agoraBin, "dispatch", "run", "--subagent", subagent, "--env", "demo")
		cmd.Env = baseEnv(home)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantCode {
			t.Fatalf("dispatch %s exited %d, want %d\n%s", subagent, code, wantCode, stderr.String())
		}
		noCanary(t, "dispatch run "+subagent+" stderr", stderr.Bytes())
		return strings.TrimSpace(string(out))
	}
	planted := run("planter", 4) // needs_input
	badask := run("badask", 3)   // worker-failed, the detail quoting the field name

	var shown bytes.Buffer
	for _, id := range []string{planted, badask} {
		shown.Write(agora(t, home, nil, "dispatch", "describe", id))
		shown.Write(agora(t, home, nil, "dispatch", "describe", id, "-o", "json"))
		shown.Write(agora(t, home, nil, "dispatch", "patch", id))
	}
	noCanary(t, "CLI describe and patch", shown.Bytes())
	desc := string(agora(t, home, nil, "dispatch", "describe", planted, "-o", "json"))
	for _, want := range []string{"[REDACTED]/f", "is [REDACTED] right?"} {
		// The output and the question are kept, masked: dropping them would also hide the secret.
		if !strings.Contains(desc, want) {
			t.Errorf("describe lacks %q:\n%s", want, desc)
		}
	}

	cs := stdioSession(t, home)
	var mcpOut bytes.Buffer
	for _, id := range []string{planted, badask} {
		mcpOut.WriteString(text(call(t, cs, "agora_dispatch_describe", map[string]any{"id": id})))
	}
	cs.Close()
	noCanary(t, "MCP agora_dispatch_describe", mcpOut.Bytes())

	export := filepath.Join(t.TempDir(), "audit.bundle")
	agora(t, home, nil, "audit", "export", "--out", export)
	b, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	noCanary(t, "audit export", b)

	to := filepath.Join(t.TempDir(), "outputs")
	agora(t, home, nil, "dispatch", "outputs", planted, "--to", to)
	var names []string
	filepath.WalkDir(to, func(p string, d fs.DirEntry, err error) error {
		names = append(names, p)
		return nil
	})
	if len(names) < 2 {
		t.Errorf("dispatch outputs --to wrote nothing: %v", names)
	}
	noCanary(t, "names written by dispatch outputs --to", []byte(strings.Join(names, "\n")))

	err = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		noCanary(t, "a name under AGORA_HOME", []byte(p))
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			noCanary(t, p, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// noCanary fails when b holds the secret or its base64 form.
func noCanary(t *testing.T, where string, b []byte) {
	t.Helper()
	for _, form := range []string{secretCanary, base64.StdEncoding.EncodeToString([]byte(secretCanary))} {
		if i := bytes.Index(b, []byte(form)); i >= 0 {
			lo, hi := max(0, i-80), min(len(b), i+len(form)+80)
			t.Errorf("%s holds the secret: ...%q...", where, b[lo:hi])
		}
	}
}
