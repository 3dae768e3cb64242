package netgw

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestUpload_RepeatedIsIdempotent: a worker that did not hear the answer to its upload sends
// the same bytes again and gets 204 again; other bytes are refused, as is any upload after
// one refused for its content.
func TestUpload_RepeatedIsIdempotent(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01UPLOADAGAIN")
	s := g.export(t, l)
	body := tarOf(t, tarEntry{name: "result.json", body: "1"})
	for i := range 2 {
		if code, msg := g.putOut(t, l, s, body); code != 204 {
			t.Fatalf("upload %d of the same bytes: %d %s, want 204", i+1, code, msg)
		}
	}
	if code, _ := g.putOut(t, l, s, tarOf(t, tarEntry{name: "result.json", body: "2"})); code != 409 {
		t.Errorf("other bytes after a stored upload: %d, want 409", code)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "1")

	refused := stageLayout(t, "01UPLOADREFUSEDAGAIN")
	rs := g.export(t, refused)
	bad := tarOf(t, tarEntry{name: "../escape", body: "x"})
	if code, _ := g.putOut(t, refused, rs, bad); code != 422 {
		t.Fatalf("a hostile upload: %d, want 422", code)
	}
	for _, b := range [][]byte{bad, body} {
		if code, _ := g.putOut(t, refused, rs, b); code != 409 {
			t.Errorf("an upload after a refused one: %d, want 409", code)
		}
	}
}

// TestUpload_CutOffIsRetried: an upload whose connection ends inside its body claims
// nothing; the worker's retry of the whole upload is stored.
func TestUpload_CutOffIsRetried(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01UPLOADCUT")
	s := g.export(t, l)
	body := tarOf(t, tarEntry{name: "result.json", body: "{}"}, tarEntry{name: "big", body: strings.Repeat("b", 1<<20)})

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	tc, err := tls.Dial("tcp", strings.TrimPrefix(g.url, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	must(t, err)
	head := "PUT " + remote.RoutePrefix + l.id + "/mounts/out HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.Token +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	_, err = io.WriteString(tc, head)
	must(t, err)
	_, err = tc.Write(body[:len(body)/2])
	must(t, err)
	agoratest.WaitFor(t, 30*time.Second, "the gateway extracting the upload", func() bool { return len(staging(t, l.out)) > 0 })
	tc.Close()
	agoratest.WaitFor(t, 30*time.Second, "the cut-off upload's end", func() bool { return len(staging(t, l.out)) == 0 })

	if code, msg := g.putOut(t, l, s, body); code != 204 {
		t.Fatalf("the retry of a cut-off upload: %d %s, want 204", code, msg)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "{}")
	if left := staging(t, l.out); len(left) > 0 {
		t.Errorf("staging directories left: %v", left)
	}
}

// TestGatewayProcess_Kill9MidUploadLeavesNoClaim, at the gateway's
// level: the real `agora gateway serve` is killed with SIGKILL while it extracts an upload;
// the restarted one stores the worker's retry of it (the first claimed nothing) and removes
// what the killed one staged.
func TestGatewayProcess_Kill9MidUploadLeavesNoClaim(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	env := append(os.Environ(), "AGORA_HOME="+home)
	initCmd := exec.Command(agoraBin, "init")
	initCmd.Env = env
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("agora init: %v\n%s", err, out)
	}
	addr := agoratest.FreeAddr(t)
	serve := func() *exec.Cmd {
		cmd := exec.Command(agoraBin, "gateway", "serve", "--listen", addr, "--advertise", "https://"+addr)
		cmd.Env = env
		cmd.Stderr = &syncBuffer{}
		must(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		agoratest.WaitFor(t, 30*time.Second, "the gateway listening", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		return cmd
	}
	first := serve()
	ca, err := os.ReadFile(filepath.Join(home, "keys", CACertFile))
	must(t, err)
	reg := &Registry{Dir: filepath.Join(home, "gateway", "sessions")}
	l := stageLayout(t, "01UPLOADKILL9")
	s, err := reg.Export(t.Context(), l.spec(t))
	must(t, err)
	defer s.Close()
	g := &gw{url: "https://" + addr, ca: ca}
	body := tarOf(t, tarEntry{name: "result.json", body: "{}"}, tarEntry{name: "big", body: strings.Repeat("k", 4<<20)})

	// Half the body, then hold: the gateway is extracting when it dies.
	pr, pw := io.Pipe()
	req, err := http.NewRequest("PUT", g.url+remote.RoutePrefix+l.id+"/mounts/out", pr)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.ContentLength = int64(len(body))
	done := make(chan error, 1)
	go func() {
		resp, err := g.httpClient().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	go pw.Write(body[:len(body)/2])
	agoratest.WaitFor(t, 30*time.Second, "the gateway extracting the upload", func() bool { return len(staging(t, l.out)) > 0 })
	must(t, first.Process.Signal(syscall.SIGKILL))
	first.Wait()
	pw.CloseWithError(io.ErrUnexpectedEOF)
	if err := <-done; err == nil {
		t.Fatal("the upload to a killed gateway succeeded")
	}

	serve()
	code, msg := g.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(body))
	if code != 204 {
		t.Fatalf("the worker's retry after the gateway's restart: %d %s, want 204", code, msg)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "{}")
	if left := staging(t, l.out); len(left) > 0 {
		t.Errorf("the killed gateway's staging is left: %v", left)
	}
	if code, _ := g.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: "x"}))); code != 409 {
		t.Errorf("other bytes after the stored retry: %d, want 409", code)
	}
}

// TestRemoteWorker_RidesOutGatewayRestart, with the real binary: the
// gateway is down when the pod's fetch step starts, and down again when the worker uploads
// (its agent's output streaming meanwhile). Each time it comes back on the same address over
// the same sessions, and the worker carries on: the fetch succeeds, the result reaches the
// host, and the output written while the gateway was away reaches the host's log after it.
func TestRemoteWorker_RidesOutGatewayRestart(t *testing.T) {
	g := startGateway(t)
	script := `echo "agent started"; sleep 2; echo "agent after the outage"; printf changed > README`
	h := newHostStage(t, "01E2EOUTAGE", script)
	var stdout, stderr syncBuffer
	s, err := g.reg.Export(t.Context(), h.spec(t, &stdout, &stderr, `{"API_KEY":"k"}`))
	must(t, err)
	defer s.Close()

	g.close()
	stage := t.TempDir()
	fetch := exec.CommandContext(t.Context(), agoratest.Worker(agoraBin), "worker", "fetch")
	fetch.Env = podEnv(g, h.id, s.Token, remote.StageEnv+"="+stage)
	var fetchLog syncBuffer
	fetch.Stdout, fetch.Stderr = &fetchLog, &fetchLog
	must(t, fetch.Start())
	// The outage itself, longer than the few quick retries a GET had before (3.4 s): a restart
	// takes seconds. Its length is what is tested, and the worker's retries run on its own
	// clock in its own process: no event could stand for it.
	time.Sleep(5 * time.Second)
	g.restart(t)
	if err := fetch.Wait(); err != nil {
		t.Fatalf("agora worker fetch across the gateway's restart: %v\n%s", err, fetchLog.String())
	}

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
	worker := exec.CommandContext(t.Context(), filepath.Join(stage, wire.BinDir, wire.BinFile), "worker")
	worker.Env = podEnv(g, h.id, s.Token, wire.RootEnv+"="+root)
	var podLog syncBuffer
	worker.Stdout, worker.Stderr = &podLog, &podLog
	must(t, worker.Start())
	agoratest.WaitFor(t, 30*time.Second, "the agent's first line at the host", func() bool { return strings.Contains(stdout.String(), "agent started") })
	g.close()
	// The agent ends and the worker uploads while the gateway is down: it says so.
	agoratest.WaitFor(t, time.Minute, "the worker's upload to meet the outage", func() bool {
		return strings.Contains(podLog.String(), "the gateway does not answer PUT mounts/out")
	})
	g.restart(t)
	if err := worker.Wait(); err != nil {
		t.Fatalf("agora worker across the gateway's restart: %v\n%s", err, podLog.String())
	}
	must(t, s.Close())
	b, err := os.ReadFile(filepath.Join(h.out, wire.ResultFile))
	if err != nil {
		t.Fatalf("no result.json at the host: %v\npod log:\n%s", err, podLog.String())
	}
	res, err := wire.ParseResult(b)
	must(t, err)
	if res.Status != wire.StatusOK {
		t.Errorf("result %s %s: %s", res.Status, res.Reason, res.Detail)
	}
	// The pod's own logs say what it rode out.
	for _, want := range []string{"the gateway does not answer GET session", "the gateway answers GET session again"} {
		if !strings.Contains(fetchLog.String(), want) {
			t.Errorf("the fetch step's log lacks %q:\n%s", want, fetchLog.String())
		}
	}
	for _, want := range []string{"the gateway does not answer PUT mounts/out", "the gateway answers PUT mounts/out again"} {
		if !strings.Contains(podLog.String(), want) {
			t.Errorf("the worker's log lacks %q:\n%s", want, podLog.String())
		}
	}
	if !strings.Contains(stdout.String(), "agent after the outage") {
		t.Errorf("the output written while the gateway was down did not reach the host:\n%s", stdout.String())
	}
	assertNoToken(t, g, s.Token)
}

// staging lists the upload staging directories beside out.
func staging(t testing.TB, out string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(out), ".upload-"+filepath.Base(out)+"-*"))
	must(t, err)
	return m
}

// TestUpload_PlacingFinishesOnlyTheSameBytes: a gateway killed while it moved an accepted
// upload's entries into the out directory leaves the mark "placing" with that body's digest.
// Only the same bytes may finish it (the worker's retry); another upload is refused, so a
// token holder cannot slip a second upload in through a gateway's death.
func TestUpload_PlacingFinishesOnlyTheSameBytes(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01UPLOADPLACING")
	s := g.export(t, l)
	first := tarOf(t, tarEntry{name: "result.json", body: "first"})
	sum := sha256.Sum256(first)
	sd := filepath.Join(g.reg.Dir, l.id)
	must(t, writeUploadMark(sd, "out", uploadMark{Placing: true, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(first))}))
	// Half placed when the gateway died.
	must(t, os.WriteFile(filepath.Join(l.out, "result.json"), []byte("half"), 0o600))

	if code, _ := g.putOut(t, l, s, tarOf(t, tarEntry{name: "result.json", body: "other"})); code != 409 {
		t.Errorf("other bytes over a placing upload: %d, want 409", code)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "half")
	if code, msg := g.putOut(t, l, s, first); code != 204 {
		t.Fatalf("the same bytes over a placing upload: %d %s, want 204", code, msg)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "first")
	if m, err := readUploadMark(sd, "out"); err != nil || m.Placing || m.Refused {
		t.Errorf("mark after the finished upload: %+v, %v; want stored", m, err)
	}
}

// TestUpload_CutAfterTheTarPlacesNothing: an upload whose connection ends after the tar's
// end marker but before the body's declared end is cut off like any other: nothing reaches
// the out directory and nothing is claimed, so what the gateway places is always a whole
// body, the one its mark names (a token holder cannot have one upload placed unmarked and
// then a second one stored).
func TestUpload_CutAfterTheTarPlacesNothing(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01UPLOADTRAILER")
	s := g.export(t, l)
	tar := tarOf(t, tarEntry{name: "result.json", body: "cut"})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	tc, err := tls.Dial("tcp", strings.TrimPrefix(g.url, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	must(t, err)
	_, err = io.WriteString(tc, "PUT "+remote.RoutePrefix+l.id+"/mounts/out HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+s.Token+
		"\r\nContent-Length: "+strconv.Itoa(len(tar)+512)+"\r\n\r\n")
	must(t, err)
	_, err = tc.Write(tar)
	must(t, err)
	agoratest.WaitFor(t, 30*time.Second, "the gateway reading the upload", func() bool { return len(staging(t, l.out)) > 0 })
	tc.Close()
	agoratest.WaitFor(t, 30*time.Second, "the cut-off upload's end", func() bool { return len(staging(t, l.out)) == 0 })
	if _, err := os.Stat(filepath.Join(l.out, "result.json")); !os.IsNotExist(err) {
		t.Errorf("a cut-off upload placed result.json (%v)", err)
	}
	if code, msg := g.putOut(t, l, s, tarOf(t, tarEntry{name: "result.json", body: "whole"})); code != 204 {
		t.Fatalf("the upload after the cut one: %d %s, want 204", code, msg)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "whole")
}
