package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse_Audit(t *testing.T) {
	src := `
audit:
  checkpoint_every: 50
  checkpoint_interval: 90s
  anchors:
    - {type: file, path: /mnt/worm/agora.anchor}
    - {type: rfc3161, url: "https://tsa.example.com/tsr", ca_file: /etc/agora/tsa.pem}
    - {type: command, argv: [/usr/local/bin/upload, --bucket, audit]}
`
	c := Default("/home")
	if err := Parse("agora.yaml", []byte(src), c); err != nil {
		t.Fatal(err)
	}
	want := Audit{
		CheckpointEvery:    50,
		CheckpointInterval: 90 * time.Second,
		Anchors: []Anchor{
			{Type: "file", Path: "/mnt/worm/agora.anchor"},
			{Type: "rfc3161", URL: "https://tsa.example.com/tsr", CAFile: "/etc/agora/tsa.pem"},
			{Type: "command", Argv: []string{"/usr/local/bin/upload", "--bucket", "audit"}},
		},
	}
	if diff := cmp.Diff(want, c.Audit); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if c.Audit.Every() != 50 || c.Audit.Interval() != 90*time.Second {
		t.Errorf("got every %d interval %s, want 50 and 1m30s", c.Audit.Every(), c.Audit.Interval())
	}
}

func TestAudit_Defaults(t *testing.T) {
	var a Audit
	if a.Every() != DefaultCheckpointEvery || a.Interval() != DefaultCheckpointInterval {
		t.Errorf("got every %d interval %s, want the defaults", a.Every(), a.Interval())
	}
}

func TestParse_AuditInvalid(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // in the error
	}{
		{"negative every", "audit: {checkpoint_every: -1}", "audit.checkpoint_every: must not be negative"},
		{"negative interval", "audit: {checkpoint_interval: -5m}", "audit.checkpoint_interval"},
		{"unknown type", "audit: {anchors: [{type: s4}]}", `audit.anchors[0].type: want file, rfc3161, command or s3, got "s4"`},
		{"s3 without s3", "audit: {anchors: [{type: s3}]}", `audit.anchors[0].s3: an s3 anchor needs s3`},
		{"relative file", "audit: {anchors: [{type: file, path: anchor.log}]}", "audit.anchors[0].path: a file anchor needs an absolute path"},
		{"file with url", "audit: {anchors: [{type: file, path: /a, url: 'https://x'}]}", "a file anchor takes only path"},
		{"tsa ftp", "audit: {anchors: [{type: rfc3161, url: 'ftp://tsa'}]}", "an rfc3161 anchor needs an http or https URL"},
		{"tsa userinfo", "audit: {anchors: [{type: rfc3161, url: 'https://u:p@tsa/x'}]}", "must not carry userinfo"},
		{"tsa relative ca", "audit: {anchors: [{type: rfc3161, url: 'https://tsa/x', ca_file: ca.pem}]}", "ca_file: must be an absolute path"},
		{"command on PATH", "audit: {anchors: [{type: command, argv: [upload]}]}", "agora does not search PATH"},
		{"command empty", "audit: {anchors: [{type: command}]}", "audit.anchors[0].argv"},
		{"duplicate", "audit: {anchors: [{type: file, path: /a}, {type: file, path: /a/}]}", "audit.anchors[1]: the same anchor as audit.anchors[0]"},
		{"unknown key", "audit: {anchors: [{type: file, path: /a, mode: x}]}", `unknown field "mode"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Parse("agora.yaml", []byte(tt.src), Default("/home"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
