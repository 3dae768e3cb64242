package netgw

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Attacks on a takeover's stage (ADR 0008: a takeover makes an adopted stage again and serves it,
// secrets included, to the pod's token). The attacker holds (a) the replicated agora.db row of
// a gateway session, (b) a pod's token (a compromised worker, or another dispatch's), or
// (c) the timing of requests around the take-back (Reattach). Each test says what it tries.

// rt46 is a takeover in progress: the session exported on the old leader (the pod's token in
// s), and the new leader over a copy of the old one's agora.db (its row optionally forged)
// that has not taken the session back yet.
type rt46 struct {
	old, next *replica
	l         *layout
	s         *remote.Session
}

// takeover46 exports l's pod session on a leader, copies its agora.db as the standby restores
// it (forge, when set, edits the dispatch's row in the copy first: a modified bucket), and
// starts the standby on it with the old leader gone.
func takeover46(t *testing.T, id string, forge func(*record)) *rt46 {
	t.Helper()
	return takeovers46(t, map[string]func(*record){id: forge})[id]
}

// takeovers46 is takeover46 of several dispatches at once, on one pair of replicas (each
// replica's start makes its certificates: one pair keeps a table of attacks fast).
func takeovers46(t *testing.T, forges map[string]func(*record)) map[string]*rt46 {
	t.Helper()
	old := startReplica(t, nil, nil)
	out := map[string]*rt46{}
	for id := range forges {
		l := stageLayout(t, id)
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		t.Cleanup(func() { s.Close() })
		out[id] = &rt46{old: old, l: l, s: s}
	}
	db := restoreDB(t, old.db)
	for id, forge := range forges {
		if forge != nil {
			forgeRow46(t, db, id, forge)
		}
	}
	old.gw.close()
	next := startReplica(t, db, old.gw)
	for _, tk := range out {
		tk.next = next
	}
	return out
}

// forgeRow46 rewrites dispatch id's gateway_sessions row in db through f (record and token
// hash), as a writer of the replica's bucket would.
func forgeRow46(t *testing.T, db *store.DB, id string, f func(*record)) {
	t.Helper()
	var raw string
	must(t, db.SQL().QueryRow(`SELECT record FROM gateway_sessions WHERE dispatch_id = ?`, id).Scan(&raw))
	var r record
	must(t, json.Unmarshal([]byte(raw), &r))
	f(&r)
	b, err := json.Marshal(&r)
	must(t, err)
	res, err := db.SQL().Exec(`UPDATE gateway_sessions SET record = ?, token_sha256 = ? WHERE dispatch_id = ?`, string(b), r.TokenSHA256, id)
	must(t, err)
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("forge the row of %s: %d rows", id, n)
	}
}

// mountAt46 returns the row's mount at dst.
func mountAt46(r *record, dst string) *mountRecord {
	for i := range r.Mounts {
		if r.Mounts[i].Dst == dst {
			return &r.Mounts[i]
		}
	}
	return nil
}

// info46 is GET session with token, parsed; fatal unless 200.
func info46(t *testing.T, r *replica, id, token string) remote.Info {
	t.Helper()
	code, body := r.do(t, "GET", remote.RoutePrefix+id+"/session", token, nil)
	if code != 200 {
		t.Fatalf("GET session: %d %q", code, body)
	}
	var info remote.Info
	must(t, json.Unmarshal([]byte(body), &info))
	return info
}

// tar46 is one entry of a downloaded tar.
type tar46 struct {
	typ        byte
	link, body string
}

func untar46(t *testing.T, body string) map[string]tar46 {
	t.Helper()
	out := map[string]tar46{}
	tr := tar.NewReader(strings.NewReader(body))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the downloaded tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = tar46{typ: h.Typeflag, link: h.Linkname, body: string(b)}
	}
}

// leaksHost46 reports content that must never reach a pod: the file outside every bind
// (stageLayout's host-secret) and the host's /etc/passwd.
func leaksHost46(body string) bool {
	return strings.Contains(body, "HOST-ONLY-CONTENT") || strings.Contains(body, "root:x:0:0") || strings.Contains(body, "root:*:0:0")
}

// servedOnlyFromSpec46 checks every mount of the taken-back session as the pod sees it: a
// mount whose GET answers 200 must be one the new leader's spec binds to fetch at that very
// destination, under that very name, of that very kind, and serve exactly that bind's
// content (byte for byte what a fresh export of the spec serves); anything else is refused.
func servedOnlyFromSpec46(t *testing.T, r *replica, id, token string, spec compute.Spec) {
	t.Helper()
	host, err := exportMounts(spec.Binds)
	must(t, err)
	info := info46(t, r, id, token)
	for _, m := range info.Mounts {
		code, body := r.do(t, "GET", remote.RoutePrefix+id+"/mounts/"+m.Name, token, nil)
		if leaksHost46(body) {
			t.Errorf("mount %q (%s): the download holds host content outside every bind", m.Name, m.Dst)
		}
		if code != 200 {
			if m.Fetch && code != 410 {
				t.Errorf("mount %q (%s) to fetch, not served: %d %q, want 410", m.Name, m.Dst, code, body)
			}
			continue
		}
		var want *mountRecord
		for i := range host {
			h := &host[i]
			if h.Name == m.Name && h.Dst == m.Dst && h.File == m.File && h.Fetch && !h.Result && len(h.Sockets) == 0 {
				want = h
			}
		}
		if want == nil {
			t.Errorf("mount %q (%s, file %v, result %v) is downloadable (%d bytes), and the spec binds nothing to fetch there", m.Name, m.Dst, m.File, m.Result, len(body))
			continue
		}
		var exp bytes.Buffer
		must(t, writeTar(&exp, want))
		if exp.String() != body {
			t.Errorf("mount %q (%s): served %d bytes, not the content of the spec's bind %s (%d bytes)", m.Name, m.Dst, len(body), want.Src, exp.Len())
		}
	}
}

// TestRedTeam46R_RowAliasesAnotherBind (attack a: a forged row): the row names its fetch
// mounts so that restore might pair them with another bind of the new leader's spec, a bind
// the spec does not fetch, or a path of the row's choosing: a destination differing by a
// trailing slash, "..", ".", a double slash or case; names swapped or duplicated; the agora
// binary's bind (BinPath); a file mount over a directory bind and a directory mount over a
// file bind; a mount the spec does not bind at all whose src is /etc; a fetch mount over a
// socket directory; a fetch mount over the result bind. Safe: whatever the pod fetches is
// exactly the spec's bind at that destination and name, of the same kind; the rest is 410
// (or 404 for what is not to fetch), and no host content outside the binds is ever served.
func TestRedTeam46R_RowAliasesAnotherBind(t *testing.T) {
	add := func(m mountRecord) func(*record) {
		return func(r *record) { r.Mounts = append(r.Mounts, m) }
	}
	dst := func(from, to string) func(*record) {
		return func(r *record) { mountAt46(r, from).Dst = to }
	}
	cases := []struct {
		name  string
		forge func(*record)
	}{
		{"trailing slash", dst(wire.WorkspacePath, wire.WorkspacePath+"/")},
		{"dot-dot", dst(wire.WorkspacePath, wire.BundlePath+"/../workspace")},
		{"dot", dst(wire.WorkspacePath, wire.DefaultRoot+"/./workspace")},
		{"double slash", dst(wire.WorkspacePath, wire.DefaultRoot+"//workspace")},
		{"case", dst(wire.WorkspacePath, strings.ToUpper(wire.WorkspacePath))},
		{"swapped names", func(r *record) {
			b, w := mountAt46(r, wire.BundlePath), mountAt46(r, wire.WorkspacePath)
			b.Name, w.Name = w.Name, b.Name
		}},
		{"duplicate name first", func(r *record) {
			w := *mountAt46(r, wire.WorkspacePath)
			w.Name = mountAt46(r, wire.BundlePath).Name
			r.Mounts = append([]mountRecord{w}, r.Mounts...)
		}},
		{"bin path", add(mountRecord{Mount: remote.Mount{Name: "bin", Dst: wire.BinPath, File: true, Fetch: true}, Src: "/proc/self/exe"})},
		{"file over a directory bind", func(r *record) { mountAt46(r, wire.WorkspacePath).File = true }},
		{"directory over a file bind", func(r *record) { mountAt46(r, wire.BundlePath+"/"+wire.ManifestFile).File = false }},
		{"not in the spec", add(mountRecord{Mount: remote.Mount{Name: "etc", Dst: wire.DefaultRoot + "/etc", Fetch: true}, Src: "/etc"})},
		{"not in the spec, a file", add(mountRecord{Mount: remote.Mount{Name: "passwd", Dst: wire.DefaultRoot + "/passwd", File: true, Fetch: true}, Src: "/etc/passwd"})},
		{"socket directory to fetch", add(mountRecord{Mount: remote.Mount{Name: "gateway", Dst: wire.GatewayPath, Fetch: true}})},
		{"fetch over the result bind", add(mountRecord{Mount: remote.Mount{Name: "out-2", Dst: wire.OutPath, Fetch: true}, Src: "/etc"})},
		{"src elsewhere", func(r *record) { mountAt46(r, wire.WorkspacePath).Src = "/etc" }},
	}
	id := func(name string) string {
		return "01RT46RALIAS-" + strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ",", "")
	}
	forges := map[string]func(*record){}
	for _, c := range cases {
		forges[id(c.name)] = c.forge
	}
	tks := takeovers46(t, forges)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := id(c.name)
			tk := tks[id]
			// The new leader's spec: its stage made again, and its gateway directory (a
			// socket directory) bound too, so a row can try to fetch it.
			spec := tk.l.spec(t)
			taken, err := tk.next.reg.Reattach(t.Context(), spec)
			if err != nil {
				return // refused whole: safe
			}
			defer taken.Close()
			servedOnlyFromSpec46(t, tk.next, id, tk.s.Token, spec)
		})
	}
}

// TestRedTeam46R_ResultMountMarkedFetch (attack a: a forged row): the row's result mount (the
// out directory, at the path this replica binds there, so restore accepts it) is also marked
// fetch. Before b398023c restore cleared Fetch on every mount; now a result mount keeps the
// row's flag. Safe: the result mount is never one to fetch (Info says so, the init step does
// not download it, GET is refused): Export never makes a result mount fetchable, and the row
// must not make the out directory readable through the gateway.
func TestRedTeam46R_ResultMountMarkedFetch(t *testing.T) {
	id := "01RT46RRESULTFETCH"
	tk := takeover46(t, id, func(r *record) { mountAt46(r, wire.OutPath).Fetch = true })
	// What sits in the new leader's out directory (the pod's own upload, or whatever the host
	// puts there) must not come back out through the gateway.
	must(t, os.WriteFile(filepath.Join(tk.l.out, "in-out"), []byte("OUT-DIRECTORY-CONTENT"), 0o600))
	taken, err := tk.next.reg.Reattach(t.Context(), tk.l.podSpec(t))
	if err != nil {
		return // refused whole: safe
	}
	defer taken.Close()
	for _, m := range info46(t, tk.next, id, tk.s.Token).Mounts {
		if m.Result && m.Fetch {
			t.Errorf("the result mount %q is offered to fetch after the takeover (the init step downloads it)", m.Name)
		}
	}
	for _, m := range taken.Mounts {
		if m.Result && m.Fetch {
			t.Errorf("the taken-back session's result mount %q is one to fetch", m.Name)
		}
	}
	code, body := tk.next.do(t, "GET", remote.RoutePrefix+id+"/mounts/out", tk.s.Token, nil)
	if code == 200 || strings.Contains(body, "OUT-DIRECTORY-CONTENT") {
		t.Errorf("GET of the result mount after a takeover from a row marking it fetch: %d (%d bytes, out's content served: %v), want refused",
			code, len(body), strings.Contains(body, "OUT-DIRECTORY-CONTENT"))
	}
}

// TestRedTeam46R_RowWithSocketsRefused (attack a): a row whose mount reaches host sockets, on
// a mount the spec binds, on one it does not, on the result mount, is refused whole: no
// session.json, and the pod's token is told to wait (503), never served.
func TestRedTeam46R_RowWithSocketsRefused(t *testing.T) {
	cases := []struct {
		name  string
		forge func(*record)
	}{
		{"workspace", func(r *record) { mountAt46(r, wire.WorkspacePath).Sockets = []string{"echo.sock"} }},
		{"result", func(r *record) { mountAt46(r, wire.OutPath).Sockets = []string{"echo.sock"} }},
		{"gateway", func(r *record) {
			r.Mounts = append(r.Mounts, mountRecord{Mount: remote.Mount{Name: "gateway", Dst: wire.GatewayPath, Writable: true, Sockets: []string{"echo.sock"}}})
		}},
	}
	forges := map[string]func(*record){}
	for _, c := range cases {
		forges["01RT46RSOCK-"+c.name] = c.forge
	}
	tks := takeovers46(t, forges)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "01RT46RSOCK-" + c.name
			tk := tks[id]
			if taken, err := tk.next.reg.Reattach(t.Context(), tk.l.spec(t)); err == nil {
				taken.Close()
				t.Fatal("a row reaching host sockets was taken back")
			}
			if _, err := os.Lstat(filepath.Join(tk.next.reg.Dir, id, sessionFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused take-back left a session.json (%v)", err)
			}
			if code, msg := tk.next.do(t, "GET", remote.RoutePrefix+id+"/sockets/gateway/echo.sock", tk.s.Token, nil); code != 503 {
				t.Errorf("the pod's tunnel after the refused take-back: %d %q, want 503", code, msg)
			}
		})
	}
}

// TestRedTeam46R_RowFileCounts (attack a): the row names more files than the new leader's
// spec has (to make the gateway relay a second read of the secrets object, or a socket it
// never listens on), fewer, none, a negative count, or the spec has none. Safe: files are
// served only when the row and the spec agree, each once; otherwise none (404).
func TestRedTeam46R_RowFileCounts(t *testing.T) {
	cases := []struct {
		name      string
		rowFiles  int
		specFiles int
		want      int
	}{
		{"row more", 2, 1, 0},
		{"row many", 1 << 20, 1, 0},
		{"row negative", -1, 1, 0},
		{"row none", 0, 1, 0},
		{"spec none", 1, 0, 0},
		{"agree", 1, 1, 1},
	}
	forges := map[string]func(*record){}
	for _, c := range cases {
		forges["01RT46RFILES-"+strings.ReplaceAll(c.name, " ", "-")] = func(r *record) { r.Files = c.rowFiles }
	}
	tks := takeovers46(t, forges)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "01RT46RFILES-" + strings.ReplaceAll(c.name, " ", "-")
			tk := tks[id]
			spec := tk.l.podSpec(t)
			spec.Files = spec.Files[:c.specFiles]
			taken, err := tk.next.reg.Reattach(t.Context(), spec)
			must(t, err)
			defer taken.Close()
			if info := info46(t, tk.next, id, tk.s.Token); info.Files != c.want || taken.Files != c.want {
				t.Errorf("files after the take-back: info %d, session %d, want %d", info.Files, taken.Files, c.want)
			}
			reads := 0
			for i := range 3 {
				code, body := tk.next.do(t, "GET", remote.RoutePrefix+id+"/files/"+string(rune('0'+i)), tk.s.Token, nil)
				if code == 200 {
					reads++
					if i != 0 || body != string(tk.l.secrets) {
						t.Errorf("files/%d: %q", i, body)
					}
				}
			}
			if code, _ := tk.next.do(t, "GET", remote.RoutePrefix+id+"/files/0", tk.s.Token, nil); code == 200 {
				t.Error("the secrets object was read a second time")
			}
			if reads != c.want {
				t.Errorf("%d files read, want %d", reads, c.want)
			}
		})
	}
}

// TestRedTeam46R_SecretsOnceAcrossReattach (attack b: the pod's own token after a takeover):
// the secrets object is served again once; a second read is 410, and a second Reattach on
// the same replica (its adopter restarted, no takeover in between) does not serve it again
// (not restored: the replica that serves it is the one that read it).
func TestRedTeam46R_SecretsOnceAcrossReattach(t *testing.T) {
	id := "01RT46RONCE"
	tk := takeover46(t, id, nil)
	taken, err := tk.next.reg.Reattach(t.Context(), tk.l.podSpec(t))
	must(t, err)
	path := remote.RoutePrefix + id + "/files/0"
	if code, body := tk.next.do(t, "GET", path, tk.s.Token, nil); code != 200 || body != string(tk.l.secrets) {
		t.Fatalf("the secrets after the take-back: %d %q", code, body)
	}
	if code, _ := tk.next.do(t, "GET", path, tk.s.Token, nil); code != 410 {
		t.Errorf("a second read of the secrets: %d, want 410", code)
	}
	again, err := tk.next.reg.Reattach(t.Context(), tk.l.podSpec(t))
	must(t, err)
	defer again.Close()
	defer taken.Close()
	if code, body := tk.next.do(t, "GET", path, tk.s.Token, nil); code == 200 {
		t.Errorf("a second Reattach on the same replica served the secrets again: %q", body)
	}
}

// TestRedTeam46R_AnotherDispatchsTokenOnReservedStage (attack b: another dispatch's worker):
// after both dispatches are taken back with their stages and secrets served again, A's token
// reaches nothing of B's (session, secrets, every mount, upload, streams): 403. And A's
// attempt consumes nothing: B's own token then reads B's secrets, once.
func TestRedTeam46R_AnotherDispatchsTokenOnReservedStage(t *testing.T) {
	tks := takeovers46(t, map[string]func(*record){"01RT46RCROSSA": nil, "01RT46RCROSSB": nil})
	a, b := tks["01RT46RCROSSA"], tks["01RT46RCROSSB"]
	ta, err := a.next.reg.Reattach(t.Context(), a.l.podSpec(t))
	must(t, err)
	defer ta.Close()
	tb, err := b.next.reg.Reattach(t.Context(), b.l.podSpec(t))
	must(t, err)
	defer tb.Close()
	// A's worker on B's routes, at the leader both were taken over by.
	pb := remote.RoutePrefix + b.l.id
	info := info46(t, b.next, b.l.id, b.s.Token)
	routes := []struct{ method, path string }{
		{"GET", pb + "/session"}, {"GET", pb + "/files/0"}, {"GET", pb + "/files/1"},
		{"PUT", pb + "/mounts/out"}, {"POST", pb + "/streams/stdout"},
	}
	for _, m := range info.Mounts {
		routes = append(routes, struct{ method, path string }{"GET", pb + "/mounts/" + m.Name})
	}
	for _, r := range routes {
		var body io.Reader
		if r.method != "GET" {
			body = strings.NewReader("x")
		}
		if code, msg := b.next.do(t, r.method, r.path, a.s.Token, body); code != 403 || leaksHost46(msg) || strings.Contains(msg, "s3cr3t") {
			t.Errorf("A's token on %s %s: %d %q, want 403", r.method, r.path, code, msg)
		}
	}
	if code, body := b.next.do(t, "GET", pb+"/files/0", b.s.Token, nil); code != 200 || body != string(b.l.secrets) {
		t.Errorf("B's own secrets after A's attempts: %d %q", code, body)
	}
	// A's own session still serves A's stage, and B's token reaches none of it.
	if code, _ := a.next.do(t, "GET", remote.RoutePrefix+a.l.id+"/files/0", b.s.Token, nil); code != 403 {
		t.Errorf("B's token on A's secrets: %d, want 403", code)
	}
	servedOnlyFromSpec46(t, a.next, a.l.id, a.s.Token, a.l.podSpec(t))
}

// TestRedTeam46R_BeforeTheTakeBack (attack c: the pod's requests before the new leader took
// its session back): every route, the secrets included, is told to wait (503), and none
// consumes the once-only secrets: after the take-back they are served, once.
func TestRedTeam46R_BeforeTheTakeBack(t *testing.T) {
	id := "01RT46RBEFORE"
	tk := takeover46(t, id, nil)
	p := remote.RoutePrefix + id
	for _, r := range []struct{ method, path string }{
		{"GET", p + "/session"}, {"GET", p + "/files/0"}, {"GET", p + "/mounts/bundle"}, {"GET", p + "/mounts/workspace"},
		{"PUT", p + "/mounts/out"}, {"POST", p + "/streams/stdout"},
	} {
		var body io.Reader
		if r.method != "GET" {
			body = bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: `{}`}))
		}
		if code, msg := tk.next.do(t, r.method, r.path, tk.s.Token, body); code != 503 {
			t.Errorf("before the take-back: %s %s: %d %q, want 503", r.method, r.path, code, msg)
		}
	}
	taken, err := tk.next.reg.Reattach(t.Context(), tk.l.podSpec(t))
	must(t, err)
	defer taken.Close()
	if code, body := tk.next.do(t, "GET", p+"/files/0", tk.s.Token, nil); code != 200 || body != string(tk.l.secrets) {
		t.Errorf("the secrets after the take-back: %d %q", code, body)
	}
}

// TestRedTeam46R_SecretsDuringTheTakeBack (attack c: a request racing Reattach): Reattach
// takes the session back in steps under the dispatch's lock: restore writes session.json
// (files: 1), then the streams' and the files' sockets are listened on. The server does not
// take that lock: a pod's GET files/0 that reads the new session.json before serveFiles
// listens dials no socket and is answered 410 "served already", which the worker takes as
// final (or, after an unanswered try, as a lost gateway): it exits without its secrets, the
// failure ADR 0008 set out to remove. The test holds Reattach right after its restore step
// (the same calls, under the same lock) and asks then. Safe: not yet served is "retry"
// (503), never "gone".
func TestRedTeam46R_SecretsDuringTheTakeBack(t *testing.T) {
	id := "01RT46RWINDOW"
	tk := takeover46(t, id, nil)
	g := tk.next.reg
	spec := tk.l.podSpec(t)
	// Reattach's first steps, as it runs them.
	unlock, err := g.lockDispatch(t.Context(), id)
	must(t, err)
	rec, err := g.standing(t.Context(), id)
	if !errors.Is(err, errNotHere) {
		unlock(false)
		t.Fatalf("standing before the take-back: %v", err)
	}
	if _, err := g.restore(t.Context(), spec, rec); err != nil {
		unlock(false)
		t.Fatal(err)
	}
	// The pod asks now, between restore and serveFiles.
	code, msg := tk.next.do(t, "GET", remote.RoutePrefix+id+"/files/0", tk.s.Token, nil)
	unlock(false)
	if code != 503 && code != 200 {
		t.Errorf("GET files/0 while the take-back is between its restore and its serving of the files: %d %q; want 503 (retry): the worker takes 410 for its secrets gone and fails", code, msg)
	}
}

// TestRedTeam46R_FailedTakeBackLeavesNoHalfSession (attack c: a take-back that fails half
// way, e.g. out of descriptors when it duplicates the secrets pipe): Reattach fails after
// restore wrote session.json, and does not remove it (Export, failing, leaves no session).
// The pod's token is then served by a session nobody follows (its files 410, its streams
// 503), and a later Reattach (the next serve's adoption, when the dispatch's end could not be
// recorded) finds a local session.json of the row's token: no restore, no file served, the
// pod's GET files/0 410 for good. Safe: the failed take-back leaves the session as it was (503
// to the pod), and a later one takes it back whole, the secrets served.
func TestRedTeam46R_FailedTakeBackLeavesNoHalfSession(t *testing.T) {
	id := "01RT46RFAILED"
	tk := takeover46(t, id, nil)
	bad := tk.l.podSpec(t)
	closed, err := os.Open(os.DevNull)
	must(t, err)
	must(t, closed.Close())
	bad.Files = []*os.File{closed} // its dup fails, after restore
	if taken, err := tk.next.reg.Reattach(t.Context(), bad); err == nil {
		taken.Close()
		t.Fatal("a Reattach whose secrets cannot be served succeeded")
	}
	p := remote.RoutePrefix + id
	if code, _ := tk.next.do(t, "GET", p+"/session", tk.s.Token, nil); code != 503 {
		t.Errorf("the pod's token after a failed take-back: GET session %d, want 503 (not taken back)", code)
	}
	taken, err := tk.next.reg.Reattach(t.Context(), tk.l.podSpec(t))
	must(t, err)
	defer taken.Close()
	if code, body := tk.next.do(t, "GET", p+"/files/0", tk.s.Token, nil); code != 200 || body != string(tk.l.secrets) {
		t.Errorf("the secrets after the take-back was retried: %d %q, want them served", code, body)
	}
}

// TestRedTeam46R_BackOnTheOldVolume (attack c: two takeovers, or a rollout replacing both
// pods, docs/providers-k8s.md): X exports, Y takes the session over, then X takes the lead
// back on its old volume, whose sessions directory still holds X's session.json of the same
// token. standing finds a local session of the row's token and serves it at once: before X's
// adopter has made the stale stage again (prepareAdopted removes and refills it meanwhile),
// and its Reattach is no restore, so the secrets (unsealed again and handed to Reattach) are
// not served. Safe: as on any takeover, 503 until the take-back, then the stage and the
// secrets served once.
func TestRedTeam46R_BackOnTheOldVolume(t *testing.T) {
	id := "01RT46RBACK"
	x := startReplica(t, nil, nil)
	l := stageLayout(t, id)
	sx, err := x.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	left, err := os.ReadFile(filepath.Join(x.reg.Dir, id, sessionFile)) // what X's death leaves
	must(t, err)
	y := startReplica(t, restoreDB(t, x.db), x.gw)
	x.gw.close()
	must(t, sx.Close()) // X's process is gone (its row in X's own database goes with it)
	ty, err := y.reg.Reattach(t.Context(), l.podSpec(t))
	must(t, err)
	// Y dies: X leads again over what the bucket holds (Y's agora.db) and its old volume.
	dbx := restoreDB(t, y.db)
	y.gw.close()
	must(t, ty.Close())
	x2 := startReplica(t, dbx, x.gw)
	must(t, os.MkdirAll(filepath.Join(x2.reg.Dir, id), 0o700))
	must(t, os.WriteFile(filepath.Join(x2.reg.Dir, id, sessionFile), left, 0o600))

	p := remote.RoutePrefix + id
	if code, msg := x2.do(t, "GET", p+"/mounts/workspace", sx.Token, nil); code != 503 {
		t.Errorf("the pod fetching from X back on its old volume before X took the session back (its stage being made again): %d (%d bytes), want 503", code, len(msg))
	}
	if code, msg := x2.do(t, "GET", p+"/files/0", sx.Token, nil); code != 503 {
		t.Errorf("the pod's secrets at X before the take-back: %d %q, want 503", code, msg)
	}
	taken, err := x2.reg.Reattach(t.Context(), l.podSpec(t))
	must(t, err)
	defer taken.Close()
	if code, body := x2.do(t, "GET", p+"/files/0", sx.Token, nil); code != 200 || body != string(l.secrets) {
		t.Errorf("the secrets at X after it took the session back again: %d %q, want them served (ADR 0008)", code, body)
	}
}

// TestRedTeam46R_SymlinksInTheRemadeStage (attack on the stage made again): the re-made
// workspace and bundle hold symlinks to the host outside the stage (a file outside every bind,
// /etc, /etc/passwd, "../../..") and a directory symlink. Safe: the download emits each as a
// symlink entry with its target as written, never its target's content, and never walks into
// a linked directory.
func TestRedTeam46R_SymlinksInTheRemadeStage(t *testing.T) {
	id := "01RT46RSYMLINKS"
	tk := takeover46(t, id, nil)
	links := map[string]string{"etc": "/etc", "passwd": "/etc/passwd", "up": "../../..", "secret": tk.l.outside, "root": "/"}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(tk.l.workspace, "src", name)))
		must(t, os.Symlink(target, filepath.Join(tk.l.bundle, name)))
	}
	spec := tk.l.podSpec(t)
	taken, err := tk.next.reg.Reattach(t.Context(), spec)
	must(t, err)
	defer taken.Close()
	for mount, prefix := range map[string]string{"workspace": "src/", "bundle": ""} {
		code, body := tk.next.do(t, "GET", remote.RoutePrefix+id+"/mounts/"+mount, tk.s.Token, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %q", mount, code, body)
		}
		if leaksHost46(body) {
			t.Errorf("%s: the download holds content from outside the stage", mount)
		}
		ents := untar46(t, body)
		for name, target := range links {
			e, ok := ents[prefix+name]
			if !ok || e.typ != tar.TypeSymlink || e.link != target || e.body != "" {
				t.Errorf("%s: %s%s -> %s: entry %+v (present %v), want a symlink entry", mount, prefix, name, target, e, ok)
			}
		}
		for name := range ents {
			for link := range links {
				if strings.HasPrefix(name, prefix+link+"/") {
					t.Errorf("%s: the download walked into the linked directory: %s", mount, name)
				}
			}
		}
	}
	servedOnlyFromSpec46(t, tk.next, id, tk.s.Token, spec)
}

// TestRedTeam46R_SymlinkedBindRoot (the spec's own bind is a symlink: a stage path replaced by
// a link to /etc or /): restore serves the spec's bind as Export does. This probes whether the
// take-back adds a way to such a bind: a row cannot make restore serve a path the spec does
// not bind (its src is ignored), so what a symlinked root exposes is what a fresh export of
// the same spec exposes; the row adds nothing. The test asserts that parity, and that the
// workspace bind's root, a symlink to /etc, is served as Export serves it (not refused by one
// and followed by the other).
func TestRedTeam46R_SymlinkedBindRoot(t *testing.T) {
	id := "01RT46RROOTLINK"
	tk := takeover46(t, id, func(r *record) { mountAt46(r, wire.WorkspacePath).Src = "/" })
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	must(t, os.Mkdir(elsewhere, 0o700))
	must(t, os.WriteFile(filepath.Join(elsewhere, "host-only"), []byte("HOST-ONLY-CONTENT"), 0o600))
	linked := filepath.Join(t.TempDir(), "workspace-link")
	must(t, os.Symlink(elsewhere, linked))
	spec := tk.l.podSpec(t)
	for i := range spec.Binds {
		if spec.Binds[i].Dst == wire.WorkspacePath {
			spec.Binds[i].Src = linked
		}
	}
	taken, err := tk.next.reg.Reattach(t.Context(), spec)
	must(t, err)
	defer taken.Close()
	_, restored := tk.next.do(t, "GET", remote.RoutePrefix+id+"/mounts/workspace", tk.s.Token, nil)
	// A fresh export of the same spec, elsewhere.
	fresh := startReplica(t, nil, nil)
	fspec := spec
	fspec.ID = "01RT46RROOTLINKF"
	fspec.Files = nil
	fs, err := fresh.reg.Export(t.Context(), fspec)
	must(t, err)
	defer fs.Close()
	_, exported := fresh.do(t, "GET", remote.RoutePrefix+fspec.ID+"/mounts/workspace", fs.Token, nil)
	if restored != exported {
		t.Errorf("a symlinked bind root: the take-back serves %d bytes, a fresh export %d: the takeover serves it otherwise", len(restored), len(exported))
	}
	if strings.Contains(restored, "root:x:0:0") {
		t.Error("the row's src (/) reached the download")
	}
	t.Logf("a bind whose root is a symlink: followed by Export and by the take-back alike: %v", strings.Contains(restored, "HOST-ONLY-CONTENT"))
}

// TestRedTeam46R_RowChoosesUploadLimits (attack a: a forged row, against what restore keeps
// of the row as it is): the row lifts its upload cap (max_upload_bytes 0: the server's 2 GiB,
// not the target's disk, which the new leader's spec says is 1 KiB), or adds a second result
// mount over the same out directory under another name, so that the upload accepted once
// per mount is accepted twice. Safe: the upload is capped by the spec's disk limit, and the
// out directory takes one upload. (Both predate b398023c: restore copies the row's cap and
// accepts any result mount whose path is the spec's result bind.)
func TestRedTeam46R_RowChoosesUploadLimits(t *testing.T) {
	const disk = 1 << 10
	old := startReplica(t, nil, nil)
	ids := []string{"01RT46RUPLOADCAP", "01RT46RUPLOADTWICE", "01RT46RUPLOADCONTROL"}
	ls := map[string]*layout{}
	toks := map[string]string{}
	for _, id := range ids {
		l := stageLayout(t, id)
		spec := l.podSpec(t)
		spec.Limits.Disk = disk
		s, err := old.reg.Export(t.Context(), spec)
		must(t, err)
		t.Cleanup(func() { s.Close() })
		ls[id], toks[id] = l, s.Token
	}
	db := restoreDB(t, old.db)
	forgeRow46(t, db, ids[0], func(r *record) { r.MaxUploadBytes = 0 })
	forgeRow46(t, db, ids[1], func(r *record) {
		m := *mountAt46(r, wire.OutPath)
		m.Name = "out-2"
		r.Mounts = append(r.Mounts, m)
	})
	old.gw.close()
	next := startReplica(t, db, old.gw)

	upload := func(t *testing.T, id string) (int, string) {
		big := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`}, tarEntry{name: "fill", body: strings.Repeat("x", 64*disk)})
		return next.do(t, "PUT", remote.RoutePrefix+id+"/mounts/out", toks[id], bytes.NewReader(big))
	}
	t.Run("control", func(t *testing.T) { // the row as the old leader wrote it: its cap holds
		id := ids[2]
		spec := ls[id].podSpec(t)
		spec.Limits.Disk = disk
		taken, err := next.reg.Reattach(t.Context(), spec)
		must(t, err)
		defer taken.Close()
		if code, msg := upload(t, id); code == 204 {
			t.Errorf("an upload over the disk cap after a takeover from an honest row: %d %q", code, msg)
		}
	})
	t.Run("cap", func(t *testing.T) {
		id := ids[0]
		spec := ls[id].podSpec(t)
		spec.Limits.Disk = disk
		taken, err := next.reg.Reattach(t.Context(), spec)
		if err != nil {
			return // refused whole: safe
		}
		defer taken.Close()
		if code, msg := upload(t, id); code == 204 {
			t.Errorf("an upload of %d bytes into a dispatch whose disk is %d bytes was accepted after a takeover from a row without a cap: %d %q", 64*disk, disk, code, msg)
		}
	})
	t.Run("twice", func(t *testing.T) {
		id := ids[1]
		spec := ls[id].podSpec(t)
		spec.Limits.Disk = disk
		taken, err := next.reg.Reattach(t.Context(), spec)
		if err != nil {
			return // refused whole: safe
		}
		defer taken.Close()
		p := remote.RoutePrefix + id + "/mounts/"
		if code, msg := next.do(t, "PUT", p+"out", toks[id], bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`}))); code != 204 {
			t.Fatalf("the pod's upload: %d %q", code, msg)
		}
		if code, _ := next.do(t, "PUT", p+"out-2", toks[id], bytes.NewReader(tarOf(t, tarEntry{name: "more.json", body: `{"added":"after the result"}`}))); code == 204 {
			ents, _ := os.ReadDir(ls[id].out)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("a second upload into the out directory, through a row's second result mount over it, was accepted: out holds %v", names)
		}
	})
}
