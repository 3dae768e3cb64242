package worker

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
	"github.com/google/go-cmp/cmp"
)

// marker is the agent script used where the agent must never run.
const marker = `touch "$AGORA_OUT/agent-ran"`

func agentRan(f *fixture) bool { return exists(f.outPath("agent-ran")) }

// rawTar builds a tar by hand, for archives package catalog would refuse to write.
func rawTar(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h.ModTime = time.Unix(0, 0)
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func overwrite(t *testing.T, p string, b []byte) {
	t.Helper()
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWorker_IntegrityFailed(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
		detail string
	}{
		{"capability archive tampered", func(t *testing.T, f *fixture) {
			p := filepath.Join(f.root, wire.BundleDir, f.man.Capabilities[0].Path)
			overwrite(t, p, append([]byte(readFile(t, p)), 0))
		}, "verify capability \"shell\": content is sha256:"},
		{"capability archive missing", func(t *testing.T, f *fixture) {
			os.Remove(filepath.Join(f.root, wire.BundleDir, f.man.Capabilities[0].Path))
		}, "verify capability \"shell\""},
		{"subagent document tampered", func(t *testing.T, f *fixture) {
			p := filepath.Join(f.root, wire.BundleDir, wire.SubagentFile)
			overwrite(t, p, []byte(strings.Replace(readFile(t, p), "agent-ran", "agent-ran2", 1)))
		}, "verify subagent \"fixer\": content is"},
		{"manifest command differs from the document", func(t *testing.T, f *fixture) {
			f.man.Command = []string{"sh", "-c", "true"}
			f.writeManifest()
		}, "command is"},
		{"manifest runtime differs from the document", func(t *testing.T, f *fixture) {
			f.man.Runtime = "openai"
			f.writeManifest()
		}, "runtime is \"exec\""},
		{"manifest drops a capability", func(t *testing.T, f *fixture) {
			f.man.Capabilities = nil
			f.writeManifest()
		}, "pins 1 capabilities, manifest lists 0"},
		{"manifest swaps a capability", func(t *testing.T, f *fixture) {
			f.man.Capabilities[0].Name = "other"
			f.writeManifest()
		}, "capability 0 is shell@"},
		{"manifest grants more than the capabilities", func(t *testing.T, f *fixture) {
			f.man.Grants.Commands = append(f.man.Grants.Commands, "rm **")
			f.writeManifest()
		}, `grants commands "rm **", which no capability declares`},
		{"manifest missing", func(t *testing.T, f *fixture) {
			os.Remove(filepath.Join(f.root, wire.BundleDir, wire.ManifestFile))
		}, "verify:"},
		{"manifest with an unknown field", func(t *testing.T, f *fixture) {
			p := filepath.Join(f.root, wire.BundleDir, wire.ManifestFile)
			overwrite(t, p, []byte(strings.Replace(readFile(t, p), `{"version":1,`, `{"version":1,"image":"x",`, 1)))
		}, `unknown field "image"`},
		{"manifest with a duplicate key", func(t *testing.T, f *fixture) {
			p := filepath.Join(f.root, wire.BundleDir, wire.ManifestFile)
			overwrite(t, p, []byte(strings.Replace(readFile(t, p), `{"version":1,`, `{"version":1,"version":1,`, 1)))
		}, `duplicate key "version"`},
		{"archive with a path that leaves the workspace", func(t *testing.T, f *fixture) {
			b := rawTar(t, &tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
			d := digest.Sum(b)
			if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.CapabilityPath(d)), b, 0o444); err != nil {
				t.Fatal(err)
			}
			swapCapability(t, f, d)
		}, `invalid path "../escape"`},
		{"archive with an absolute symlink", func(t *testing.T, f *fixture) {
			b := rawTar(t, &tar.Header{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777})
			d := digest.Sum(b)
			if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.CapabilityPath(d)), b, 0o444); err != nil {
				t.Fatal(err)
			}
			swapCapability(t, f, d)
		}, "symlink to an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, marker)
			f.write()
			tt.tamper(t, f)
			_, res := f.run()
			if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonIntegrityFailed {
				t.Fatalf("got %q %q %q, want failed integrity-failed", res.Status, res.Reason, res.Detail)
			}
			if !strings.Contains(res.Detail, tt.detail) {
				t.Errorf("detail %q does not contain %q", res.Detail, tt.detail)
			}
			if agentRan(f) {
				t.Error("the agent ran")
			}
			if res.Patch != nil || exists(f.outPath(wire.PatchFile)) {
				t.Error("a patch was captured")
			}
			if diff := cmp.Diff([]string{wire.PhaseVerify}, phaseNames(res)); diff != "" || res.Phases[0].OK {
				t.Errorf("phases (-want +got):\n%s", diff)
			}
		})
	}
}

// swapCapability points the subagent document and the manifest at archive d instead of the
// first capability, with correct digests, so only the archive's content is wrong.
func swapCapability(t *testing.T, f *fixture, d digest.Digest) {
	t.Helper()
	f.man.Capabilities[0] = wire.Bundle{Name: "shell", Digest: d, Path: wire.CapabilityPath(d)}
	doc := `{"capabilities":[{"digest":"` + string(d) + `","name":"shell"}],"command":` +
		mustJSON(t, f.command) + `,"description":"","model":"","runtime":"exec","system_prompt":"","version":1}`
	if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.SubagentFile), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f.man.Subagent.Digest = digest.Sum([]byte(doc))
	f.writeManifest()
}

func TestWorker_CommandNotGrantedIsDenied(t *testing.T) {
	f := newFixture(t, marker)
	f.caps[0].yaml = "commands:\n  - python3 **\n  - sh -c true\n"
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonDenied {
		t.Fatalf("got %q %q %q, want failed denied", res.Status, res.Reason, res.Detail)
	}
	if !strings.Contains(res.Detail, "matches no commands pattern") {
		t.Errorf("detail %q", res.Detail)
	}
	if agentRan(f) {
		t.Error("the agent ran")
	}
}

func TestWorker_SecretsReachTheAgent(t *testing.T) {
	const canary = "canary-7f3a9c1e"
	t.Setenv("AGORA_TEST_HOST_LEAK", "host-value")
	f := newFixture(t, `[ "$TOKEN" = `+canary+` ] || exit 9
env > "$AGORA_OUT/env.txt"`)
	f.man.SecretKeys = []string{"TOKEN"}
	f.man.InputJSON = `{"k":1}`
	f.withSecrets(`{"TOKEN":"` + canary + `"}`)
	f.write()
	_, res := f.run()
	if res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q (exit %d)", res.Status, res.Reason, res.Detail, res.ExitCode)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, f.outPath("env.txt"))), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	want := map[string]string{
		"PATH":              agentPath,
		"HOME":              f.tmp,
		"LANG":              "C.UTF-8",
		"GREETING":          "hi",
		"TOKEN":             canary,
		"AGORA_INPUT_JSON":  `{"k":1}`,
		"AGORA_DISPATCH_ID": f.man.DispatchID,
		"AGORA_OUT":         f.outPath(),
		"AGORA_WORKSPACE":   f.ws(),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("agent env %s = %q, want %q", k, env[k], v)
		}
	}
	for k := range env {
		if k == "AGORA_TEST_HOST_LEAK" || k == "AGORA_INPUTS" {
			t.Errorf("agent env has %s", k)
		}
	}
	if b := readFile(t, f.outPath(wire.ResultFile)); strings.Contains(b, canary) {
		t.Errorf("the secret is in result.json: %s", b)
	}
}

func TestWorker_EmptyInputIsEmptyObject(t *testing.T) {
	f := newFixture(t, `[ "$AGORA_INPUT_JSON" = '{}' ] || exit 8`)
	f.write()
	if _, res := f.run(); res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
}

func TestWorker_SecretsRefused(t *testing.T) {
	const canary = "canary-oops-d41d8"
	tests := []struct {
		name, obj string
		none      bool
		detail    string
	}{
		{"wrong key", `{"OTHER":"` + canary + `"}`, false, "missing keys TOKEN"},
		{"extra key", `{"TOKEN":"` + canary + `","EXTRA":"` + canary + `"}`, false, "1 keys the manifest does not name"},
		{"not JSON", canary + `-{`, false, "not a JSON object of string values"},
		{"not an object", `["` + canary + `"]`, false, "not a JSON object"},
		{"null", `null`, false, "not a JSON object"},
		{"number value", `{"TOKEN":7}`, false, "not a JSON object of string values"},
		{"duplicate key", `{"TOKEN":"` + canary + `","TOKEN":"b"}`, false, "not a JSON object"},
		{"trailing data", `{"TOKEN":"` + canary + `"} x`, false, "not a JSON object"},
		{"NUL in value", `{"TOKEN":"a\u0000` + canary + `"}`, false, "contains a NUL byte"},
		{"no descriptor", "", true, "no secrets descriptor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, marker)
			f.man.SecretKeys = []string{"TOKEN"}
			if !tt.none {
				f.withSecrets(tt.obj)
			}
			f.write()
			_, res := f.run()
			if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonFetchFailed {
				t.Fatalf("got %q %q %q, want failed fetch-failed", res.Status, res.Reason, res.Detail)
			}
			if !strings.Contains(res.Detail, tt.detail) {
				t.Errorf("detail %q does not contain %q", res.Detail, tt.detail)
			}
			if strings.Contains(readFile(t, f.outPath(wire.ResultFile)), "canary") || strings.Contains(f.stderr.String(), "canary") {
				t.Error("a secret value reached the result or stderr")
			}
			if agentRan(f) {
				t.Error("the agent ran")
			}
		})
	}
}

func TestWorker_SecretsDescriptorIgnoredWithoutKeys(t *testing.T) {
	f := newFixture(t, `[ -z "$TOKEN" ] || exit 9`)
	f.withSecrets(`{"TOKEN":"unused"}`)
	f.write()
	if _, res := f.run(); res.Status != wire.StatusOK {
		t.Fatalf("got %q %q %q", res.Status, res.Reason, res.Detail)
	}
}

func TestWorker_SecretsDescriptorByNumber(t *testing.T) {
	pipeFD := func(t *testing.T, content string) int {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString(content)
		w.Close()
		fd, err := syscall.Dup(int(r.Fd()))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	socketFD := func(t *testing.T) int {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Close(fds[1])
		t.Cleanup(func() { syscall.Close(fds[0]) })
		return fds[0]
	}
	tests := []struct {
		name   string
		fd     func(t *testing.T) int
		status wire.Status
		detail string
	}{
		{"a pipe with the secrets", func(t *testing.T) int { return pipeFD(t, `{"TOKEN":"v"}`) }, wire.StatusOK, ""},
		{"not open", func(t *testing.T) int { return 1000 }, wire.StatusFailed, "descriptor 1000 is not open"},
		{"a socket is left alone", socketFD, wire.StatusFailed, "is not a pipe or a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := tt.fd(t)
			// The agent must not inherit the descriptor (a file could be read again).
			f := newFixture(t, `[ "$TOKEN" = v ] || exit 9; [ -e /proc/self/fd/`+strconv.Itoa(fd)+` ] && exit 10; exit 0`)
			f.man.SecretKeys = []string{"TOKEN"}
			f.write()
			code := run(t.Context(), options{Root: f.root, TempDir: f.tmp, secretsFD: fd})
			if code != 0 {
				t.Fatalf("exit code %d", code)
			}
			res, err := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || !strings.Contains(res.Detail, tt.detail) {
				t.Errorf("got %q %q %q, want %q with %q", res.Status, res.Reason, res.Detail, tt.status, tt.detail)
			}
			if tt.name == "a socket is left alone" {
				var st syscall.Stat_t
				if err := syscall.Fstat(fd, &st); err != nil {
					t.Errorf("a descriptor the worker does not own was closed")
				}
			}
		})
	}
}

// The attack: a manifest that drops an approve rule a capability declares, so a held call
// would run unheld. The worker refuses it before the agent starts.
func TestWorker_ManifestDropsApproveRule(t *testing.T) {
	f := newFixture(t, marker)
	f.caps[0].yaml = "commands:\n  - sh -c *\napprove:\n  - {command: \"sh -c *\"}\n"
	f.write()
	f.man.Grants.Approve = nil
	f.writeManifest()
	_, res := f.run()
	if res.Status != wire.StatusFailed || res.Reason != lifecycle.ReasonIntegrityFailed {
		t.Fatalf("got %q %q %q, want failed integrity-failed", res.Status, res.Reason, res.Detail)
	}
	if want := `capability approve rule "command: sh -c *" is not in the manifest's grant`; !strings.Contains(res.Detail, want) {
		t.Errorf("detail %q does not contain %q", res.Detail, want)
	}
	if agentRan(f) {
		t.Error("the agent ran")
	}
}
