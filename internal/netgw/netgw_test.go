package netgw

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRoundTrip runs a session end to end over real TLS: export, fetch every Fetch mount into
// a stage, the worker's side serving the host socket through tunnels, the secrets file, the
// output streams, and the upload landing in the host's out directory.
func TestRoundTrip(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01TESTROUNDTRIP")
	s := g.export(t, l)

	var names []string
	for _, m := range s.Mounts {
		names = append(names, m.Name)
	}
	if want := []string{"bundle", "bundle-manifest-json", "workspace", "out", "gateway"}; !slices.Equal(names, want) {
		t.Fatalf("mounts %v, want %v (the agora binary's bind is no mount)", names, want)
	}
	gwm := s.Mounts[4]
	if !slices.Equal(gwm.Sockets, []string{"echo.sock"}) || gwm.Fetch || !gwm.Writable {
		t.Errorf("gateway mount %+v: want sockets [echo.sock], writable, not fetched", gwm)
	}
	if m := s.Mounts[1]; !m.File || !m.Fetch || m.Writable {
		t.Errorf("manifest mount %+v: want a fetched read-only file", m)
	}
	if m := s.Mounts[3]; !m.Result || m.Fetch {
		t.Errorf("out mount %+v: want a result, not fetched", m)
	}

	// The init step: fetch into a stage.
	c := g.client(t, l.id, s.Token)
	ctx := t.Context()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Files != 1 || info.Version != workerVersion() {
		t.Errorf("info %+v: want 1 file and version %q", info, workerVersion())
	}
	stage := t.TempDir()
	for _, m := range info.Mounts {
		if m.Fetch {
			if err := c.Fetch(ctx, m, filepath.Join(stage, m.Name)); err != nil {
				t.Fatalf("fetch %s: %v", m.Name, err)
			}
		}
	}
	checkFile(t, filepath.Join(stage, "workspace", "src", "main.go"), "package main\n")
	checkFile(t, filepath.Join(stage, "bundle", "capabilities", "c.tar"), strings.Repeat("c", 5000))
	checkFile(t, filepath.Join(stage, "bundle-manifest-json", remote.FileName), `{"version":1}`)
	if fi, err := os.Stat(filepath.Join(stage, "workspace", "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v, want mode 0755", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(stage, "workspace", "inlink")); err != nil || target != "src/main.go" {
		t.Errorf("inlink: %q %v, want a symlink to src/main.go", target, err)
	}

	// The worker: a layout root whose gateway directory is the socket mount.
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, wire.GatewayDir), 0o700))
	must(t, os.Mkdir(filepath.Join(root, wire.OutDir), 0o700))
	setRemoteEnv(t, g, l.id, s.Token)
	var localOut, localErr bytes.Buffer
	w, err := workerremote.Start(ctx, root, &localOut, &localErr)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{remote.TokenEnv, remote.GatewayURLEnv, remote.CAEnv} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%q is still in the environment after Start", k, v)
		}
	}
	secrets, err := io.ReadAll(w.SecretsFile)
	if err != nil || !bytes.Equal(secrets, l.secrets) {
		t.Errorf("secrets %q %v, want %q", secrets, err, l.secrets)
	}
	w.SecretsFile.Close()
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+"/files/0", s.Token, nil); code != http.StatusGone {
		t.Errorf("second GET files/0: %d, want 410 (served once)", code)
	}
	for i := range 3 {
		conn, err := net.Dial("unix", filepath.Join(root, wire.GatewayDir, "echo.sock"))
		if err != nil {
			t.Fatal(err)
		}
		msg := strings.Repeat("ping", 1000*(i+1))
		go func() { io.WriteString(conn, msg); conn.(*net.UnixConn).CloseWrite() }()
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || string(got) != msg {
			t.Fatalf("echo through the tunnel: %d bytes %v, want %d", len(got), err, len(msg))
		}
	}
	// The agent (same uid) replaces the socket file in the writable volume: the worker's own
	// calls go through DialSocket, in-process, and still reach the host.
	sockFile := filepath.Join(root, wire.GatewayDir, "echo.sock")
	must(t, os.Remove(sockFile))
	fake, err := net.Listen("unix", sockFile)
	must(t, err)
	defer fake.Close()
	conn, err := w.DialSocket(ctx, "echo.sock")
	must(t, err)
	io.WriteString(conn, "direct")
	conn.(interface{ CloseWrite() error }).CloseWrite()
	if got, err := io.ReadAll(conn); err != nil || string(got) != "direct" {
		t.Errorf("DialSocket echo: %q %v", got, err)
	}
	conn.Close()
	if _, err := w.DialSocket(ctx, "nosuch.sock"); err == nil {
		t.Error("DialSocket of a socket the session does not list succeeded")
	}
	io.WriteString(w.Stdout, "hello out\n")
	io.WriteString(w.Stderr, "hello err\n")
	must(t, os.WriteFile(filepath.Join(root, wire.OutDir, wire.ResultFile), []byte(`{"status":"ok"}`), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, wire.OutDir, wire.OutputsDir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, wire.OutDir, wire.OutputsDir, "sub", "a.txt"), []byte("A"), 0o644))
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, wire.OutDir, "planted")))
	if err := w.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(l.out, wire.ResultFile), `{"status":"ok"}`)
	checkFile(t, filepath.Join(l.out, wire.OutputsDir, "sub", "a.txt"), "A")
	if fi, err := os.Stat(filepath.Join(l.out, wire.ResultFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("uploaded result.json: %v %v, want mode 0600", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(l.out, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a symlink in the pod's out dir reached the host: %v", err)
	}
	if got := localOut.String(); got != "hello out\n" {
		t.Errorf("container log %q", got)
	}
	must(t, s.Close())
	if got := l.stdout.String(); got != "hello out\n" {
		t.Errorf("spec.Stdout %q, want the worker's stdout", got)
	}
	if got := l.stderr.String(); got != "hello err\n" {
		t.Errorf("spec.Stderr %q, want the worker's stderr", got)
	}
	if _, err := os.Stat(filepath.Join(g.reg.Dir, l.id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("session directory after Close: %v, want removed", err)
	}
	assertNoToken(t, g, s.Token)
}

// TestExport_AtRest: the session directory is private and holds the token's hash only.
func TestExport_AtRest(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01ATREST")
	s := g.export(t, l)
	sd := filepath.Join(g.reg.Dir, l.id)
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{g.reg.Dir, 0o700}, {sd, 0o700}, {filepath.Join(sd, sessionFile), 0o600}, {filepath.Join(sd, stdoutSocket), 0o600}} {
		fi, err := os.Stat(p.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != p.mode {
			t.Errorf("%s: mode %v, want %v", p.path, fi.Mode().Perm(), p.mode)
		}
	}
	b, err := os.ReadFile(filepath.Join(sd, sessionFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(s.Token)) || bytes.Contains(b, []byte(strings.TrimPrefix(s.Token, TokenPrefix))) {
		t.Error("session.json holds the token")
	}
	if !strings.HasPrefix(s.Token, TokenPrefix) || len(s.Token) != len(TokenPrefix)+43 {
		t.Errorf("token shape %d bytes, want %s + 43", len(s.Token), TokenPrefix)
	}
}

// TestServer_Auth: only the dispatch's own token, only while its session stands.
func TestServer_Auth(t *testing.T) {
	g := startGateway(t)
	a := g.export(t, stageLayout(t, "01DISPATCHA"))
	b := g.export(t, stageLayout(t, "01DISPATCHB"))
	route := func(id, r string) string { return remote.RoutePrefix + id + "/" + r }
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"own token", "GET", route("01DISPATCHA", "session"), a.Token, 200},
		{"no token", "GET", route("01DISPATCHA", "session"), "", 401},
		{"another dispatch's token", "GET", route("01DISPATCHB", "session"), a.Token, 403},
		{"another dispatch's token on a mount", "GET", route("01DISPATCHB", "mounts/workspace"), a.Token, 403},
		{"another dispatch's token on an upload", "PUT", route("01DISPATCHB", "mounts/out"), a.Token, 403},
		{"a made-up token", "GET", route("01DISPATCHA", "session"), TokenPrefix + strings.Repeat("A", 43), 403},
		{"a token without the prefix", "GET", route("01DISPATCHA", "session"), strings.TrimPrefix(a.Token, TokenPrefix), 401},
		{"an unknown dispatch", "GET", route("01NOSUCH", "session"), a.Token, 401},
		{"an invalid dispatch id", "GET", remote.RoutePrefix + "..%2F01DISPATCHA/session", a.Token, 404},
		{"an encoded slash in a mount", "GET", route("01DISPATCHA", "mounts/work%2Fspace"), a.Token, 404},
		{"an unknown route", "GET", route("01DISPATCHA", "keys"), a.Token, 404},
		{"a query", "GET", route("01DISPATCHA", "session") + "?x=1", a.Token, 404},
		{"an unknown mount", "GET", route("01DISPATCHA", "mounts/etc"), a.Token, 404},
		{"fetching the result mount", "GET", route("01DISPATCHA", "mounts/out"), a.Token, 404},
		{"uploading to a fetch mount", "PUT", route("01DISPATCHA", "mounts/workspace"), a.Token, 403},
		{"a socket not listed", "GET", route("01DISPATCHA", "sockets/gateway/other.sock"), a.Token, 404},
		{"a tunnel without upgrade", "GET", route("01DISPATCHA", "sockets/gateway/echo.sock"), a.Token, 426},
		{"a file past the spec's", "GET", route("01DISPATCHA", "files/1"), a.Token, 404},
		{"POST a session", "POST", route("01DISPATCHA", "session"), a.Token, 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := g.do(t, tc.method, tc.path, tc.token, nil)
			if code != tc.want {
				t.Errorf("%s %s: %d %q, want %d", tc.method, tc.path, code, body, tc.want)
			}
		})
	}
	if !strings.Contains(g.logs.String(), "gateway token refused") {
		t.Error("a refused token was not logged")
	}
	// Revocation: the next request after Close is refused.
	must(t, a.Close())
	if code, _ := g.do(t, "GET", route("01DISPATCHA", "session"), a.Token, nil); code != 401 {
		t.Errorf("after Close: %d, want 401", code)
	}
	if code, _ := g.do(t, "GET", route("01DISPATCHB", "session"), b.Token, nil); code != 200 {
		t.Errorf("another session after A's Close: %d, want 200", code)
	}
	assertNoToken(t, g, a.Token, b.Token)
}

// TestServer_ReexportRevokes: exporting a dispatch again (a restarted supervisor) makes the
// old token worthless.
func TestServer_ReexportRevokes(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01REEXPORT")
	old := g.export(t, l)
	fresh := g.export(t, l)
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+"/session", old.Token, nil); code != 403 {
		t.Errorf("old token: %d, want 403", code)
	}
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+"/session", fresh.Token, nil); code != 200 {
		t.Errorf("new token: %d, want 200", code)
	}
}

// TestTunnel_ClosedOnRevoke: an open tunnel ends when its session is closed.
func TestTunnel_ClosedOnRevoke(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01TUNNELREVOKE")
	s := g.export(t, l)
	c := g.client(t, l.id, s.Token)
	conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "x")
	buf := make([]byte, 1)
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	must(t, s.Close())
	conn.SetReadDeadline(time.Now().Add(5 * revokeCheck))
	if _, err := conn.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("tunnel after revoke: read %v, want it closed by the gateway", err)
	}
	if _, err := c.DialTunnel(t.Context(), "gateway", "echo.sock"); err == nil {
		t.Error("a new tunnel after revoke was accepted")
	}
}

// TestDownload_SymlinkOutsideNotFollowed: the host content outside the bind never reaches
// the tar.
func TestDownload_SymlinkOutsideNotFollowed(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01SYMLINKOUT")
	s := g.export(t, l)
	code, body := g.do(t, "GET", remote.RoutePrefix+l.id+"/mounts/workspace", s.Token, nil)
	if code != 200 {
		t.Fatalf("GET workspace: %d", code)
	}
	if strings.Contains(body, "HOST-ONLY-CONTENT") {
		t.Fatal("the tar holds the content of a file outside the bind")
	}
	tr := tar.NewReader(strings.NewReader(body))
	found := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == "outlink" {
			found = true
			if hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != l.outside {
				t.Errorf("outlink: type %q -> %q, want a symlink entry", hdr.Typeflag, hdr.Linkname)
			}
		}
	}
	if !found {
		t.Error("the symlink is not in the tar")
	}
}

// TestUpload_Once: a result mount takes one upload, even a refused one.
func TestUpload_Once(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01UPLOADONCE")
	s := g.export(t, l)
	path := remote.RoutePrefix + l.id + "/mounts/out"
	if code, body := g.do(t, "PUT", path, s.Token, bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: "1"}))); code != 204 {
		t.Fatalf("first upload: %d %s", code, body)
	}
	if code, _ := g.do(t, "PUT", path, s.Token, bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: "2"}))); code != 409 {
		t.Errorf("second upload: %d, want 409", code)
	}
	checkFile(t, filepath.Join(l.out, "result.json"), "1")
}

// TestUpload_Attacks: each hostile tar is refused whole, with the out directory unchanged.
func TestUpload_Attacks(t *testing.T) {
	g := startGateway(t)
	g.srv.MaxUploadBytes = 1 << 20
	many := make([]tarEntry, MaxUploadEntries+1)
	for i := range many {
		many[i] = tarEntry{name: "f" + strconv.Itoa(i)}
	}
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		raw     []byte
		want    string
	}{
		{name: "symlink", entries: []tarEntry{{name: "result.json", link: "/etc/shadow", typ: tar.TypeSymlink}}, want: "symlink"},
		{name: "symlink then a file through it", entries: []tarEntry{{name: "d", link: "/tmp", typ: tar.TypeSymlink}, {name: "d/x", body: "x"}}, want: "symlink"},
		{name: "dot dot", entries: []tarEntry{{name: "ok", body: "1"}, {name: "../escape", body: "x"}}, want: "unclean"},
		{name: "dot dot inside", entries: []tarEntry{{name: "a/../../escape", body: "x"}}, want: "unclean"},
		{name: "absolute", entries: []tarEntry{{name: "/tmp/abs", body: "x"}}, want: "absolute"},
		{name: "hardlink", entries: []tarEntry{{name: "a", body: "x"}, {name: "b", link: "/etc/passwd", typ: tar.TypeLink}}, want: "hardlink"},
		{name: "device", entries: []tarEntry{{name: "dev", typ: tar.TypeChar}}, want: "character device"},
		{name: "fifo", entries: []tarEntry{{name: "p", typ: tar.TypeFifo}}, want: "fifo"},
		{name: "duplicate", entries: []tarEntry{{name: "a", body: "1"}, {name: "a", body: "2"}}, want: "duplicate"},
		{name: "file over dir", entries: []tarEntry{{name: "a/b", body: "1"}, {name: "a", body: "2"}}, want: "exists"},
		{name: "too many entries", entries: many, want: "more than 4096 entries"},
		{name: "oversize", entries: []tarEntry{{name: "a", body: strings.Repeat("x", 600<<10)}, {name: "b", body: strings.Repeat("x", 600<<10)}}, want: "over the 1048576 byte limit"},
		{name: "not a tar", raw: []byte(strings.Repeat("garbage", 200)), want: "not a valid tar"},
		{name: "truncated", raw: tarOf(t, tarEntry{name: "a", body: strings.Repeat("x", 4096)})[:1024], want: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := stageLayout(t, "01ATTACK"+strings.ToUpper(strings.NewReplacer(" ", "", "-", "").Replace(tc.name)))
			must(t, os.WriteFile(filepath.Join(l.out, "before"), []byte("B"), 0o600))
			s := g.export(t, l)
			body := tc.raw
			if body == nil {
				body = tarOf(t, tc.entries...)
			}
			code, msg := g.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(body))
			if code == 204 || !strings.Contains(msg, tc.want) {
				t.Errorf("upload: %d %q, want refused with %q", code, msg, tc.want)
			}
			ents, _ := os.ReadDir(l.out)
			if len(ents) != 1 || ents[0].Name() != "before" {
				t.Errorf("out dir changed: %v", ents)
			}
			ents, _ = os.ReadDir(filepath.Dir(l.out))
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".upload-") {
					t.Errorf("staging directory %s left behind", e.Name())
				}
			}
			if _, err := os.Lstat("/tmp/abs"); err == nil {
				t.Error("/tmp/abs was written")
			}
		})
	}
}

func checkFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if string(b) != want {
		t.Errorf("%s: %q, want %q", path, truncateForTest(string(b)), truncateForTest(want))
	}
}

func truncateForTest(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// assertNoToken fails when a token appears in the gateway's log.
func assertNoToken(t *testing.T, g *gw, tokens ...string) {
	t.Helper()
	logs := g.logs.String()
	for _, tok := range tokens {
		if strings.Contains(logs, tok) || strings.Contains(logs, strings.TrimPrefix(tok, TokenPrefix)) {
			t.Errorf("a token is in the gateway's log:\n%s", logs)
		}
	}
}

func setRemoteEnv(t *testing.T, g *gw, id, token string) {
	t.Setenv(remote.GatewayURLEnv, g.url)
	t.Setenv(remote.TokenEnv, token)
	t.Setenv(remote.CAEnv, string(g.ca))
	t.Setenv(workerremote.DispatchEnv, id)
}

type tarEntry struct {
	name, body, link string
	typ              byte
}

func tarOf(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: 0o644, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		must(t, tw.WriteHeader(hdr))
		if typ == tar.TypeReg {
			io.WriteString(tw, e.body)
		}
	}
	must(t, tw.Close())
	return b.Bytes()
}

// TestRegistry_Reattach: a supervisor restarted after the exporter died takes the session
// back: the pod's token still works and its streams reach the new writers.
func TestRegistry_Reattach(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01REATTACH")
	spec := l.spec(t)
	s, err := g.reg.Export(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	// A new supervisor reattaches while session.json stands (the old exporter's listeners
	// are replaced at the same paths).
	var out syncBuffer
	spec.Stdout = &out
	r, err := g.reg.Reattach(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token != "" || len(r.Mounts) != len(s.Mounts) {
		t.Errorf("reattached session: token %q, %d mounts; want no token and %d mounts", r.Token, len(r.Mounts), len(s.Mounts))
	}
	code, body := g.do(t, "POST", remote.RoutePrefix+l.id+"/streams/stdout", s.Token, strings.NewReader("after restart\n"))
	if code != 200 || body != remote.StreamDone {
		t.Fatalf("stream after reattach: %d", code)
	}
	must(t, r.Close())
	if got := out.String(); got != "after restart\n" {
		t.Errorf("new stdout %q", got)
	}
	if code, _ := g.do(t, "GET", remote.RoutePrefix+l.id+"/session", s.Token, nil); code != 401 {
		t.Errorf("after the reattached Close: %d, want 401", code)
	}
	s.Close()
	if _, err := g.reg.Reattach(t.Context(), spec); !errors.Is(err, ErrNoSession) {
		t.Errorf("reattach without a session: %v, want ErrNoSession", err)
	}
}
