package local

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_Start_ExitCode(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	for _, sandbox := range []string{compute.SandboxBwrap, compute.SandboxNone} {
		tests := []struct {
			name       string
			script     string
			wantCode   int
			wantStdout string
		}{
			{name: "Success", script: "echo hello", wantCode: 0, wantStdout: "hello\n"},
			{name: "ExitThree", script: "echo out; echo err >&2; exit 3", wantCode: 3, wantStdout: "out\n"},
		}
		for _, tt := range tests {
			t.Run(sandbox+"/"+tt.name, func(t *testing.T) {
				r := run(t, p, compute.Spec{ID: "exit", Sandbox: sandbox, Argv: []string{"sh", "-c", tt.script}})
				if r.exit.Code != tt.wantCode || r.exit.Signal != "" || r.exit.TimedOut || r.exit.Cancelled {
					t.Errorf("exit = %+v, want code %d and nothing else (stderr %q)", r.exit, tt.wantCode, r.stderr)
				}
				if r.stdout != tt.wantStdout {
					t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
				}
				if tt.wantCode == 3 && r.stderr != "err\n" {
					t.Errorf("stderr = %q, want %q", r.stderr, "err\n")
				}
				if r.exit.Duration <= 0 {
					t.Errorf("duration = %v, want > 0", r.exit.Duration)
				}
			})
		}
	}
}

func TestProvider_Start_EnvIsExactlySpecEnv(t *testing.T) {
	requireBwrap(t)
	t.Setenv("AGORA_TEST_HOST_CANARY", "host-canary-value")
	p := newProvider(t, Options{})
	env := []string{"PATH=/usr/bin:/bin", "FOO=bar baz", "EMPTY=", "WITH_EQ=a=b"}
	for _, sandbox := range []string{compute.SandboxBwrap, compute.SandboxNone} {
		t.Run(sandbox, func(t *testing.T) {
			r := run(t, p, compute.Spec{ID: "env", Sandbox: sandbox, Argv: []string{"env"}, Env: env, Dir: "/usr"})
			if r.exit.Code != 0 {
				t.Fatalf("exit = %+v, stderr %q", r.exit, r.stderr)
			}
			got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			want := append(slices.Clone(env), "PWD=/usr")
			slices.Sort(got)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("environment inside (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProvider_Start_SecretOnFileDescriptor(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	const secret = "agora-test-secret-5f0c2e91"
	secretR, secretW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer secretR.Close()
	if _, err := secretW.WriteString(secret); err != nil {
		t.Fatal(err)
	}
	secretW.Close()
	holdR, holdW, err := os.Pipe() // the sandbox waits on fd 4 until the test closes holdW
	if err != nil {
		t.Fatal(err)
	}
	defer holdR.Close()
	defer holdW.Close()

	var out syncBuffer
	h, err := p.Start(t.Context(), compute.Spec{
		ID:     "secret",
		Argv:   []string{"sh", "-c", "cat /proc/self/fd/3; echo; cat <&4"},
		Env:    []string{"PATH=/usr/bin:/bin"},
		Files:  []*os.File{secretR, holdR},
		Stdout: &out,
		Stderr: &out,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	agoratest.WaitFor(t, 10*time.Second, "the secret read inside", func() bool { return strings.Contains(out.String(), secret) })
	// While the sandbox runs, no process on the host carries the secret in its argv or
	// environment.
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if strings.Contains(string(b), secret) {
				t.Errorf("/proc/%s/%s holds the secret", e.Name(), f)
			}
		}
	}
	holdW.Close()
	exit, err := h.Wait()
	if err != nil || exit.Code != 0 {
		t.Fatalf("Wait = %+v, %v; output %q", exit, err, out.String())
	}
	if got := strings.TrimSpace(out.String()); got != secret {
		t.Errorf("output = %q, want the secret only", got)
	}
}
