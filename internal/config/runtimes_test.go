package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

func TestParse_Runtimes(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    map[string]string // runtime -> binary
		wantErr []string
	}{
		{name: "absent means PATH", src: "", want: map[string]string{"claude-code": "", "codex": ""}},
		{
			name: "both set",
			src:  "runtimes:\n  claude-code: {binary: /usr/local/bin/claude}\n  codex:\n    binary: /opt/codex\n",
			want: map[string]string{"claude-code": "/usr/local/bin/claude", "codex": "/opt/codex"},
		},
		{name: "empty entry", src: "runtimes:\n  codex: {}\n", want: map[string]string{"codex": ""}},
		{
			name:    "unknown runtime names the known ones",
			src:     "runtimes:\n  claude: {binary: /usr/bin/claude}\n",
			wantErr: []string{"agora.yaml:2: runtimes.claude:", `runtime "claude" has no host binary to configure; known: claude-code, codex`},
		},
		{
			name:    "exec has no binary",
			src:     "runtimes:\n  exec: {binary: /bin/sh}\n",
			wantErr: []string{`runtime "exec" has no host binary`},
		},
		{
			name:    "relative path",
			src:     "runtimes:\n  claude-code: {binary: bin/claude}\n",
			wantErr: []string{`runtimes.claude-code.binary: must be an absolute, clean path, got "bin/claude"`},
		},
		{
			name:    "unclean path",
			src:     "runtimes:\n  codex: {binary: /opt/../tmp/codex}\n",
			wantErr: []string{`runtimes.codex.binary: must be an absolute, clean path`},
		},
		{
			name:    "unknown field",
			src:     "runtimes:\n  codex: {path: /opt/codex}\n",
			wantErr: []string{"runtimes.codex.path: unknown field", "known fields: binary"},
		},
		{
			name:    "every error at once",
			src:     "runtimes:\n  a: {}\n  codex: {binary: x}\n",
			wantErr: []string{`runtime "a"`, `runtimes.codex.binary`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default("/h")
			err := config.Parse("agora.yaml", []byte(tt.src), c)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Parse = nil, want an error with %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Parse error = %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for rt, want := range tt.want {
				if got := c.RuntimeBinary(rt); got != want {
					t.Errorf("RuntimeBinary(%q) = %q, want %q", rt, got, want)
				}
			}
		})
	}
}
