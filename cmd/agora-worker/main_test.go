package main

import (
	"bytes"
	"strings"
	"testing"
)

// Command lines the host never writes are refused with the usage, exit 2, before anything
// runs: no worker starts, no hook judges, no program is exec'd.
func TestRun_UnknownCommandLines(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"version"},
		{"worker", "extra"},
		{"worker", "fetch", "extra"},
		{"fdpass", "/agora/bin/agora-worker", "worker"}, // no "--"
		{"fdpass", "--"}, // no program
		{"Worker"},
		{"--help"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("run(%q) = %d, want %d", args, code, exitUsage)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), "agora-worker runs inside agora's sandboxes") {
			t.Errorf("run(%q): stdout %q, stderr %q", args, stdout.String(), stderr.String())
		}
	}
}

// A hook event with a misconfigured hook is refused as claude reads a refusal: exit 2, the
// reason on stderr, nothing on stdout (claude would read stdout as a decision).
func TestRun_HookRefusesMisconfigured(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"worker", "hook", "--gateway", "relative.sock"}, strings.NewReader("{}"), &stdout, &stderr)
	if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "misconfigured") {
		t.Errorf("code %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
