package netgw

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/sandboxfs"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// hostStage is a dispatch's stage as the supervisor lays it out for the exec runtime: a
// bundle with one capability granting `sh -c *`, a workspace, an empty out directory.
type hostStage struct {
	dir, bundle, workspace, out, capFiles, gateway string
	id                                             string
}

func newHostStage(t *testing.T, id, script string) *hostStage {
	t.Helper()
	dir := t.TempDir()
	h := &hostStage{dir: dir, id: id, bundle: filepath.Join(dir, "bundle"), workspace: filepath.Join(dir, "workspace"),
		out: filepath.Join(dir, "out"), capFiles: filepath.Join(dir, "capabilities"), gateway: filepath.Join(dir, "gw")}
	for _, d := range []string{filepath.Join(h.bundle, "capabilities"), h.workspace, h.out, h.gateway} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(h.workspace, "README"), []byte("before\n"), 0o644))
	yaml := "commands:\n  - sh -c *\n"
	archive, err := catalog.Archive([]catalog.File{{Path: catalog.CapabilityFile, Mode: 0o644, Size: int64(len(yaml)), Data: []byte(yaml)}})
	must(t, err)
	d := digest.Sum(archive)
	must(t, os.WriteFile(filepath.Join(h.bundle, wire.CapabilityPath(d)), archive, 0o444))
	must(t, os.MkdirAll(filepath.Join(h.capFiles, "shell"), 0o755))
	command := []string{"sh", "-c", script}
	doc, err := catalog.SubagentDoc{Runtime: "exec", SystemPrompt: "test", Command: command, Capabilities: []catalog.Pin{{Name: "shell", Digest: d}}}.Marshal()
	must(t, err)
	must(t, os.WriteFile(filepath.Join(h.bundle, wire.SubagentFile), doc, 0o444))
	man := wire.Manifest{
		Version: wire.ManifestVersion, DispatchID: id, Runtime: "exec", Command: command,
		Subagent:            wire.Bundle{Name: "e2e", Digest: digest.Sum(doc), Path: wire.SubagentFile},
		Capabilities:        []wire.Bundle{{Name: "shell", Digest: d, Path: wire.CapabilityPath(d)}},
		SecretKeys:          []string{"API_KEY"},
		AgentTimeoutSeconds: 60, SetupTimeoutSeconds: 60,
	}
	man.Grants.Commands = []string{"sh -c *"}
	b, err := man.Marshal()
	must(t, err)
	must(t, os.WriteFile(filepath.Join(h.bundle, wire.ManifestFile), b, 0o644))
	echo(t, filepath.Join(h.gateway, "gateway.sock"))
	return h
}

func (h *hostStage) spec(t *testing.T, stdout, stderr *syncBuffer, secrets string) compute.Spec {
	rd, wr, err := os.Pipe()
	must(t, err)
	go func() { wr.WriteString(secrets); wr.Close() }()
	t.Cleanup(func() { rd.Close() })
	return compute.Spec{
		ID: h.id,
		Binds: []compute.Bind{
			{Src: agoratest.Worker(agoraBin), Dst: wire.BinPath},
			{Src: h.bundle, Dst: wire.BundlePath},
			{Src: h.workspace, Dst: wire.WorkspacePath, Writable: true},
			{Src: h.out, Dst: wire.OutPath, Writable: true, Result: true},
			{Src: h.capFiles, Dst: wire.CapabilityFilesPath},
			{Src: h.gateway, Dst: wire.GatewayPath},
		},
		Files:  []*os.File{rd},
		Stdout: stdout, Stderr: stderr,
	}
}

// podEnv is the environment a pod's containers get.
func podEnv(g *gw, id, token string, extra ...string) []string {
	return append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
		remote.GatewayURLEnv + "=" + g.url, remote.TokenEnv + "=" + token, remote.CAEnv + "=" + string(g.ca),
		workerremote.DispatchEnv + "=" + id}, extra...)
}

// TestRemoteWorker_EndToEnd runs the real binary as a pod would: `agora worker fetch` into a
// stage, then `agora worker` (remote mode) on a layout made of the stage's volumes, and checks
// that the host's out directory holds a result.json the host can read and trust.
func TestRemoteWorker_EndToEnd(t *testing.T) {
	g := startGateway(t)
	script := `echo "agent says hi"; env; printf changed > README; printf %s "$API_KEY" > key-check`
	h := newHostStage(t, "01E2EREMOTEWORKER", script)
	var stdout, stderr syncBuffer
	s, err := g.reg.Export(t.Context(), h.spec(t, &stdout, &stderr, `{"API_KEY":"k-123"}`))
	must(t, err)
	defer s.Close()

	stage := t.TempDir()
	fetch := exec.CommandContext(t.Context(), agoratest.Worker(agoraBin), "worker", "fetch")
	fetch.Env = podEnv(g, h.id, s.Token, remote.StageEnv+"="+stage)
	if out, err := fetch.CombinedOutput(); err != nil {
		t.Fatalf("agora worker fetch: %v\n%s", err, out)
	}
	bin := filepath.Join(stage, wire.BinDir, wire.BinFile)
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("stage/bin/agora: %v %v, want mode 0555", fi, err)
	}

	// The kubelet's part: each volume at its Dst (below a layout root here).
	root := t.TempDir()
	for _, m := range s.Mounts {
		dst := workerremote.Local(root, m.Dst)
		must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		if m.Fetch {
			must(t, os.Rename(filepath.Join(stage, m.Name), dst))
		} else {
			must(t, os.Mkdir(dst, 0o755))
		}
	}
	worker := exec.CommandContext(t.Context(), bin, "worker")
	worker.Env = podEnv(g, h.id, s.Token, wire.RootEnv+"="+root)
	var podLog bytes.Buffer
	worker.Stdout, worker.Stderr = &podLog, &podLog
	if err := worker.Run(); err != nil {
		t.Fatalf("agora worker: %v\n%s", err, podLog.String())
	}
	must(t, s.Close())

	// The host reads the out directory as reconcile does.
	dir, err := sandboxfs.Open(h.out)
	must(t, err)
	defer dir.Close()
	b, err := dir.ReadFile(wire.ResultFile, 1<<20)
	if err != nil {
		t.Fatalf("host out/result.json: %v", err)
	}
	res, err := wire.ParseResult(b)
	if err != nil {
		t.Fatalf("result.json: %v\n%s", err, b)
	}
	if res.Status != wire.StatusOK {
		t.Fatalf("result %s %s: %s\npod log:\n%s", res.Status, res.Reason, res.Detail, podLog.String())
	}
	if res.Patch == nil {
		t.Fatal("result declares no patch")
	}
	patch, err := dir.ReadVerified(wire.PatchFile, 1<<20, res.Patch.SHA256)
	if err != nil {
		t.Fatalf("patch.diff against its declared hash: %v", err)
	}
	if !strings.Contains(string(patch), "+changed") || !strings.Contains(string(patch), "key-check") {
		t.Errorf("patch does not hold the agent's changes:\n%s", patch)
	}
	if !strings.Contains(string(patch), "+k-123") {
		t.Errorf("the secret (files/0) did not reach the agent's environment:\n%s", patch)
	}
	if !strings.Contains(stdout.String(), "agent says hi") {
		t.Errorf("spec.Stdout %q: want the agent's output streamed back", stdout.String())
	}
	for _, out := range []string{stdout.String(), stderr.String(), podLog.String()} {
		if strings.Contains(out, s.Token) {
			t.Error("the token reached the agent's environment or a log")
		}
	}
	if strings.Contains(stdout.String(), remote.GatewayURLEnv) || strings.Contains(stdout.String(), remote.CAEnv) {
		t.Error("a gateway variable reached the agent's environment")
	}
	assertNoToken(t, g, s.Token)
}

// TestRemoteWorker_FetchRefusesOtherVersion: a worker image of another agora than the host's
// fails the fetch step with the fix.
func TestRemoteWorker_FetchRefusesOtherVersion(t *testing.T) {
	g := startGatewayVersion(t, "v9.9.9")
	h := newHostStage(t, "01E2EVERSION", "true")
	var stdout, stderr syncBuffer
	s, err := g.reg.Export(t.Context(), h.spec(t, &stdout, &stderr, `{"API_KEY":"k"}`))
	must(t, err)
	defer s.Close()
	fetch := exec.CommandContext(t.Context(), agoratest.Worker(agoraBin), "worker", "fetch")
	fetch.Env = podEnv(g, h.id, s.Token, remote.StageEnv+"="+t.TempDir())
	out, err := fetch.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the host runs v9.9.9: rebuild it with make image") {
		t.Fatalf("fetch: %v\n%s\nwant refused for the version", err, out)
	}
	if strings.Contains(string(out), s.Token) {
		t.Error("the token is in the fetch step's output")
	}
}

// TestRemoteWorker_UploadFailureExitsNonZero: when the result cannot reach the host, the
// worker fails: a second upload (the mount was claimed) is refused.
func TestRemoteWorker_UploadFailureExitsNonZero(t *testing.T) {
	g := startGateway(t)
	h := newHostStage(t, "01E2EUPLOADFAIL", "true")
	var stdout, stderr syncBuffer
	s, err := g.reg.Export(t.Context(), h.spec(t, &stdout, &stderr, `{"API_KEY":"k"}`))
	must(t, err)
	defer s.Close()
	// Someone claimed the out mount first.
	if code, _ := g.do(t, "PUT", remote.RoutePrefix+h.id+"/mounts/out", s.Token, bytes.NewReader(tarOf(t))); code != 204 {
		t.Fatalf("claim: %d", code)
	}
	root := t.TempDir()
	for _, m := range s.Mounts {
		must(t, os.MkdirAll(workerremote.Local(root, m.Dst), 0o755))
	}
	cmd := exec.CommandContext(context.Background(), agoratest.Worker(agoraBin), "worker")
	cmd.Env = podEnv(g, h.id, s.Token, wire.RootEnv+"="+root)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("worker exited 0 with its upload refused:\n%s", out)
	}
	if !strings.Contains(string(out), "uploaded already") {
		t.Errorf("worker output does not say why:\n%s", out)
	}
}
