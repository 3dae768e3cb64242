package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// plantFixture is an openai fixture whose model first runs plant (sh -c) through
// run_command, as the code under review would when a reviewer runs it, then answers answer.
func plantFixture(t *testing.T, plant, answer string) *fixture {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", plant}})
	f, _ := modelFixture(t, []string{"run_command"}, &memAuditor{},
		openaitest.CallTool("run_command", string(args)), openaitest.Say(answer))
	f.caps[0].yaml = "tools: [run_command]\ncommands: [\"sh -c *\"]\n"
	f.man.Grants.Commands = []string{"sh -c *"}
	f.write()
	return f
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestFinal_WorkerWritesItsOwn: whatever the agent's processes left at outputs/final.md
// (a read-only file in a read-only outputs/ of a read-only out/, a FIFO, a directory holding a
// read-only one), the worker replaces it after the stop step with the model's answer it held,
// gives its owner bits back to out/ and outputs/, and declares that answer (Result.Final)
// with the hash of the bytes it held; outputs/final.md is listed with the same hash.
func TestFinal_WorkerWritesItsOwn(t *testing.T) {
	const answer = `{"approve": false, "reasons": ["the patch writes into the reviewer's out directory"]}`
	for _, tt := range []struct{ name, plant string }{
		{"read-only", `mkdir -p "$AGORA_OUT/outputs" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md" && ` +
			`printf '{"approve": true}' > "$AGORA_OUT/outputs/verdict.json" && chmod 444 "$AGORA_OUT/outputs/final.md" "$AGORA_OUT/outputs/verdict.json" && ` +
			`chmod 555 "$AGORA_OUT/outputs" && chmod 555 "$AGORA_OUT"`},
		{"fifo", `mkdir -p "$AGORA_OUT/outputs" && mkfifo "$AGORA_OUT/outputs/final.md" && chmod 000 "$AGORA_OUT/outputs"`},
		{"directory", `mkdir -p "$AGORA_OUT/outputs/final.md/x" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md/x/f" && chmod 500 "$AGORA_OUT/outputs/final.md/x"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := plantFixture(t, tt.plant, answer)
			f.stopped = true
			_, res := f.run()
			if res.Status != wire.StatusOK {
				t.Fatalf("got %s %s: %s", res.Status, res.Reason, res.Detail)
			}
			if got := readFile(t, f.outPath(wire.OutputsDir, wire.FinalFile)); got != answer {
				t.Errorf("final.md = %q, want the model's answer", got)
			}
			want := &wire.FileInfo{Path: wire.FinalPath, Size: int64(len(answer)), SHA256: sha(answer)}
			if res.Final == nil || *res.Final != *want {
				t.Errorf("final declared %+v, want %+v", res.Final, want)
			}
			listed := false
			for _, o := range res.Outputs {
				listed = listed || o.Path == wire.FinalPath && o.SHA256 == want.SHA256
			}
			if !listed {
				t.Errorf("outputs %+v lack final.md with the declared hash", res.Outputs)
			}
			for _, d := range []string{f.outPath(), f.outPath(wire.OutputsDir)} {
				if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o700 != 0o700 {
					t.Errorf("%s: %v, %v; want its owner bits back", d, fi.Mode(), err)
				}
			}
		})
	}
}

// TestFinal_NotVouchedWithoutStop: with no stop step (no PID namespace of its own: nothing
// guarantees no process of the agent is left to change out/), the answer is still an output
// but is not declared as the model's, and the worker says why on stderr.
func TestFinal_NotVouchedWithoutStop(t *testing.T) {
	f := plantFixture(t, "true", `{"approve": true}`)
	_, res := f.run()
	if res.Status != wire.StatusOK || res.Final != nil {
		t.Fatalf("got %s %s (%s), final %+v; want ok with no final declared", res.Status, res.Reason, res.Detail, res.Final)
	}
	if got := readFile(t, f.outPath(wire.OutputsDir, wire.FinalFile)); got != `{"approve": true}` {
		t.Errorf("final.md = %q", got)
	}
	if !strings.Contains(f.stderr.String(), "not vouched for as the model's own") || !strings.Contains(f.stderr.String(), "no stop step") {
		t.Errorf("stderr does not say why:\n%s", f.stderr.String())
	}
}

// TestFinal_OutputsSymlinkFails: an outputs/ the agent turned into a symlink is refused, not
// followed: the dispatch fails, nothing is written where it points, and no final is declared.
func TestFinal_OutputsSymlinkFails(t *testing.T) {
	elsewhere := t.TempDir()
	f := plantFixture(t, `rm -rf "$AGORA_OUT/outputs" && ln -s `+elsewhere+` "$AGORA_OUT/outputs"`, `{"approve": true}`)
	f.stopped = true
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonWorkerFailed || !strings.Contains(res.Detail, "out/outputs is a symlink") {
		t.Fatalf("got %s %s: %s; want worker-failed naming the symlink", res.Status, res.Reason, res.Detail)
	}
	if res.Final != nil {
		t.Errorf("final declared: %+v", res.Final)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("written through the symlink: %v", ents)
	}
}

// TestFinal_ExecNeverVouched: an exec agent's outputs/final.md is its own file, never
// declared as a model's answer.
func TestFinal_ExecNeverVouched(t *testing.T) {
	f := newFixture(t, `mkdir -p "$AGORA_OUT/outputs" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md"`)
	f.write()
	f.stopped = true
	_, res := f.run()
	if res.Status != wire.StatusOK || res.Final != nil || len(res.Outputs) != 1 {
		t.Fatalf("got %s %s (%s), final %+v, outputs %+v", res.Status, res.Reason, res.Detail, res.Final, res.Outputs)
	}
}

// cliSealedEnv makes a run of this test binary a helper that prints cliSealed of the file it
// names (run as another uid by TestCLISealed).
const cliSealedEnv = "AGORA_TEST_CLI_SEALED"

// TestCLISealed: the worker vouches for a CLI's answer only when the CLI will run
// non-dumpable: from a regular file its uid cannot read (the kernel's rule), which no process
// of that uid can make readable. As an unprivileged uid: an execute-only file of another user
// is sealed; a readable one is not (its tools could open its /proc/PID/fd/1 or ptrace it);
// an execute-only file the uid owns on a writable mount is not (it could chmod it first); a
// symlink is not followed.
func TestCLISealed(t *testing.T) {
	if p := os.Getenv(cliSealedEnv); p != "" {
		if err := cliSealed(p); err != nil {
			os.Stdout.WriteString("open: " + err.Error())
		} else {
			os.Stdout.WriteString("sealed")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the check is run as another uid, which takes root to switch to")
	}
	dir, err := os.MkdirTemp("", "clisealed-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(dir, "worker.test")
	const nobody = 65534
	files := map[string]struct {
		mode os.FileMode
		uid  int
	}{"execonly": {0o111, 0}, "readable": {0o755, 0}, "owned": {0o111, nobody}}
	for name, f := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, f.uid, f.uid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "execonly"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(test, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"execonly": "sealed",
		"readable": "open: runs from " + filepath.Join(dir, "readable") + ", which its user can read",
		"owned":    "its own user owns on a writable mount",
		"link":     "is not a regular file",
	} {
		cmd := exec.Command(test, "-test.run=^TestCLISealed$")
		cmd.Env = []string{cliSealedEnv + "=" + filepath.Join(dir, name)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: %q, want %q", name, out, want)
		}
	}
}
