package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRedTeam28W_RefusesHostCommands: the slim worker runs only its
// four sandbox words. Every host command of agora (dispatch, serve, catalog, verify, orch,
// doctor, mcp), the hidden worker words spelt with extra or missing words, flags before the
// word, a case-folded or padded word, and an empty command line are refused with exit 2, the
// list of what it runs on stderr, nothing on stdout, and nothing read from stdin.
func TestRedTeam28W_RefusesHostCommands(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{""},
		{"dispatch", "--target", "local", "run"},
		{"serve"},
		{"mcp", "serve"},
		{"catalog", "list"},
		{"verify", "bundle.json"},
		{"orch", "serve"},
		{"doctor"},
		{"--help"},
		{"help"},
		{"version"},
		{"Worker"},
		{"worker "},
		{" worker"},
		{"worker", "extra"},
		{"worker", "--help"},
		{"worker", "fetch", "extra"},
		{"worker", "Hook"},
		{"--", "worker"},
		{"-v", "worker"},
		{"fdpass"},
		{"fdpass", "--"},
		{"fdpass", "/bin/sh"},
		{"fdpass", "-x", "/bin/sh"},
	} {
		var stdout, stderr bytes.Buffer
		stdin := &countingReader{}
		code := run(args, stdin, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("agora-worker %q: exit %d, want %d", args, code, exitUsage)
		}
		if stdout.Len() != 0 {
			t.Errorf("agora-worker %q wrote %q to stdout", args, stdout.String())
		}
		if stdin.reads != 0 {
			t.Errorf("agora-worker %q read its stdin", args)
		}
		msg := stderr.String()
		if !strings.Contains(msg, "unknown command line") || !strings.Contains(msg, "agora-worker worker hook ARGS...") ||
			!strings.Contains(msg, "started by agora, not by people") {
			t.Errorf("agora-worker %q: stderr %q does not say what it runs", args, msg)
		}
	}
}

type countingReader struct{ reads int }

func (r *countingReader) Read([]byte) (int, error) { r.reads++; return 0, nil }
