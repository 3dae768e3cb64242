package netgw

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// replica is one serve replica's gateway: its own sessions directory (its volume) and its own
// agora.db, with the sessions kept in it (DBSessions); fence is what Server.Fence asks.
type replica struct {
	*gw
	db    *store.DB
	fence error
}

// startReplica starts a gateway over a registry with a store in db (a fresh agora.db holding
// gateway_sessions when db is nil). Every replica of a test shares the first one's CA, as the
// chart's replicas share keys/gateway-ca.*.
func startReplica(t testing.TB, db *store.DB, ca *gw) *replica {
	t.Helper()
	if db == nil {
		var err error
		db, err = store.Open(context.Background(), filepath.Join(t.TempDir(), "agora.db"), SessionMigrations)
		must(t, err)
		t.Cleanup(func() { db.Close() })
	}
	r := &replica{db: db}
	r.gw = startGatewayWith(t, workerVersion(), func(s *Server) {
		s.Registry.Sessions = &DBSessions{DB: db}
		s.Fence = func() error { return r.fence }
	})
	if ca != nil {
		// The CA and server certificate of the first replica: restart on them.
		r.gw.close()
		r.gw.certs, r.gw.ca = ca.certs, ca.ca
		r.gw.restart(t)
	}
	return r
}

// restoreDB is what the standby restores from object storage: a consistent copy of db as it
// stands now (VACUUM INTO, a snapshot as the replica's segments make one).
func restoreDB(t *testing.T, db *store.DB) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agora.db")
	if _, err := db.SQL().Exec(`VACUUM INTO ?`, path); err != nil {
		t.Fatal(err)
	}
	copy, err := store.Open(t.Context(), path, SessionMigrations)
	must(t, err)
	t.Cleanup(func() { copy.Close() })
	return copy
}

// podSpec is a kubernetes dispatch's spec on a replica: no host socket (a model gateway or
// egress proxy cannot outlive its supervisor), the result mount at out.
func (l *layout) podSpec(t testing.TB) compute.Spec {
	s := l.spec(t)
	var binds []compute.Bind
	for _, b := range s.Binds {
		if b.Dst != wire.GatewayPath {
			binds = append(binds, b)
		}
	}
	s.Binds = binds
	return s
}

// TestStoredSession_TakenOverByTheNewLeader: a session exported on the leader is in its
// agora.db; the standby, restored from a copy of that database (its own sessions directory
// empty: the old leader's volume is gone), answers the pod's token 503 (retry) until it takes
// the session back (Reattach), then serves what the pod fetches, and the secrets object, from
// the stage it made again (a pod killed with its leader mid-fetch fetches it all again), its
// upload into the result mount on its own disk and its streams. Attacks: the database holds
// no token, and its hash is no token.
func TestStoredSession_TakenOverByTheNewLeader(t *testing.T) {
	old := startReplica(t, nil, nil)
	l := stageLayout(t, "01TAKEOVER")
	spec := l.podSpec(t)
	s, err := old.reg.Export(t.Context(), spec)
	must(t, err)
	defer s.Close()
	stored, err := old.reg.storedRecord(t.Context(), l.id)
	if err != nil || stored.TokenSHA256 != hashToken(s.Token) {
		t.Fatalf("the leader's agora.db holds %+v (%v), want the session of the pod's token", stored, err)
	}

	// The old leader dies; the standby restores its agora.db and leads.
	restored := restoreDB(t, old.db)
	old.gw.close()
	next := startReplica(t, restored, old.gw)
	path := remote.RoutePrefix + l.id + "/session"
	if code, msg := next.do(t, "GET", path, s.Token, nil); code != 503 {
		t.Errorf("the pod's token before the new leader took the session back: %d %q, want 503 (the worker retries)", code, msg)
	}
	if code, _ := next.do(t, "GET", path, TokenPrefix+"AAAA", nil); code != 403 {
		t.Errorf("another token before the take-back: %d, want 403", code)
	}
	// Attack: the replicated database holds the token's hash, never the token; the hash,
	// presented as a token, opens nothing.
	raw, err := os.ReadFile(restored.Path())
	must(t, err)
	body := strings.TrimPrefix(s.Token, TokenPrefix)
	if bytes.Contains(raw, []byte(body)) || bytes.Contains(raw, []byte(s.Token)) {
		t.Fatal("the replicated agora.db holds the pod's gateway token")
	}
	sum := hashToken(s.Token)
	for _, forged := range []string{TokenPrefix + sum, TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(sum))[:43]} {
		if code, _ := next.do(t, "GET", path, forged, nil); code != 403 {
			t.Errorf("the stored hash replayed as a token (%.12s...): %d, want 403", forged, code)
		}
	}

	// The new leader adopts the dispatch: the same stage paths (AGORA_HOME is the same path on
	// every replica), made again from the same dispatch (the out directory empty; a file in
	// the bundle that only the new leader's stage holds shows whose disk is served), and
	// the secrets unsealed again.
	must(t, os.RemoveAll(l.out))
	must(t, os.Mkdir(l.out, 0o700))
	must(t, os.WriteFile(filepath.Join(l.bundle, "made-again"), []byte("on the new leader"), 0o644))
	stdout := &syncBuffer{}
	spec = l.podSpec(t)
	spec.Stdout = stdout
	taken, err := next.reg.Reattach(t.Context(), spec)
	must(t, err)
	defer taken.Close()
	c := next.client(t, l.id, s.Token)
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatalf("the pod's token after the take-back: %v", err)
	}
	fetched := 0
	for _, m := range info.Mounts {
		if m.Fetch {
			fetched++
		}
		if len(m.Sockets) > 0 {
			t.Errorf("mount %s reaches a host socket of the old leader", m.Name)
		}
		if m.Name == "bundle" {
			// A pod killed with its leader while it fetched fetches again, here.
			dir := filepath.Join(t.TempDir(), "bundle")
			if err := c.Fetch(t.Context(), m, dir); err != nil {
				t.Fatalf("fetching the bundle from the new leader: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "made-again")); err != nil || string(b) != "on the new leader" {
				t.Errorf("the bundle fetched from the new leader: %q %v, want its own stage's", b, err)
			}
		}
	}
	if fetched != 3 || info.Files != 1 {
		t.Errorf("taken back: %d mounts to fetch and %d files, want the bundle, its manifest, the workspace and the secrets object", fetched, info.Files)
	}
	if b, err := c.File(t.Context(), 0, 1<<20); err != nil || string(b) != string(l.secrets) {
		t.Errorf("the secrets object from the new leader: %q %v", b, err)
	}
	if code, msg := next.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`}))); code != 204 {
		t.Fatalf("the pod's upload to the new leader: %d %q", code, msg)
	}
	if b, err := os.ReadFile(filepath.Join(l.out, "result.json")); err != nil || string(b) != `{"status":"ok"}` {
		t.Errorf("the upload is not in the new leader's out directory: %q %v", b, err)
	}
	if code, msg := next.do(t, "POST", remote.RoutePrefix+l.id+"/streams/stdout", s.Token, strings.NewReader("after the takeover\n")); code != 200 {
		t.Errorf("the pod's stdout to the new leader: %d %q", code, msg)
	}
	must(t, taken.Close())
	if !strings.Contains(stdout.String(), "after the takeover") {
		t.Errorf("the new leader's supervisor got %q on stdout", stdout.String())
	}
	// Closed on the new leader: its row is gone, the token opens nothing.
	if _, err := next.reg.storedRecord(t.Context(), l.id); !errors.Is(err, ErrNoSession) {
		t.Errorf("the stored session after its close: %v, want none", err)
	}
	if code, _ := next.do(t, "GET", path, s.Token, nil); code != 401 {
		t.Errorf("the token after the session closed: %d, want 401", code)
	}
}

// TestStoredSession_ClosedOnTheOldLeaderStaysClosed: a session closed (or revoked) on the old
// leader before its database was replicated is not revived by the new leader: no take-back,
// and the token is refused 401, which ends the worker's retries.
func TestStoredSession_ClosedOnTheOldLeaderStaysClosed(t *testing.T) {
	for _, how := range []string{"closed", "revoked"} {
		t.Run(how, func(t *testing.T) {
			old := startReplica(t, nil, nil)
			l := stageLayout(t, "01CLOSEDOLD"+strings.ToUpper(how[:1]))
			spec := l.podSpec(t)
			s, err := old.reg.Export(t.Context(), spec)
			must(t, err)
			defer s.Close() // a revoked session's exporter still stops its listeners
			if how == "closed" {
				must(t, s.Close())
			} else {
				must(t, old.reg.Revoke(t.Context(), l.id))
			}
			next := startReplica(t, restoreDB(t, old.db), old.gw)
			if _, err := next.reg.Reattach(t.Context(), spec); !errors.Is(err, ErrNoSession) {
				t.Errorf("the new leader took back a session %s on the old one: %v", how, err)
			}
			if code, _ := next.do(t, "GET", remote.RoutePrefix+l.id+"/session", s.Token, nil); code != 401 {
				t.Errorf("the token of a session %s on the old leader, at the new one: %d, want 401", how, code)
			}
			// And on the old leader's own disk: its session.json is gone with the row.
			if code, _ := old.do(t, "GET", remote.RoutePrefix+l.id+"/session", s.Token, nil); code != 401 {
				t.Errorf("the token of a session %s, at the old leader: %d, want 401", how, code)
			}
		})
	}
}

// TestStoredSession_RowDecides: a local session.json written with the store stands only while
// its row does: a row deleted behind it (the dispatch's end, by the database's trigger)
// revokes it, whatever the disk says. A session exported without a store (an older agora's) is
// still served from its file.
func TestStoredSession_RowDecides(t *testing.T) {
	r := startReplica(t, nil, nil)
	l := stageLayout(t, "01ROWDECIDES")
	s, err := r.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	path := remote.RoutePrefix + l.id + "/session"
	if code, _ := r.do(t, "GET", path, s.Token, nil); code != 200 {
		t.Fatalf("the session: %d", code)
	}
	if _, err := r.db.SQL().Exec(`DELETE FROM gateway_sessions`); err != nil {
		t.Fatal(err)
	}
	if code, _ := r.do(t, "GET", path, s.Token, nil); code != 401 {
		t.Errorf("the token once its row is gone: %d, want 401", code)
	}

	legacy := stageLayout(t, "01ROWLEGACY")
	plain := &Registry{Dir: r.reg.Dir} // the same directory, no store: an agora without stored sessions
	ls, err := plain.Export(t.Context(), legacy.podSpec(t))
	must(t, err)
	defer ls.Close()
	if code, msg := r.do(t, "GET", remote.RoutePrefix+legacy.id+"/session", ls.Token, nil); code != 200 {
		t.Errorf("a session exported without the store: %d %q, want 200 (its file decides)", code, msg)
	}
}

// TestStoredSession_ForgedMountRefused (attack): a stored row whose result mount points its
// upload anywhere but the path this replica binds there for the dispatch (the home's keys,
// say) is refused on take-back; so is one reaching host sockets.
func TestStoredSession_ForgedMountRefused(t *testing.T) {
	old := startReplica(t, nil, nil)
	l := stageLayout(t, "01FORGEDMOUNT")
	spec := l.podSpec(t)
	s, err := old.reg.Export(t.Context(), spec)
	must(t, err)
	defer s.Close()
	keys := filepath.Join(old.home, "keys")
	for name, edit := range map[string]string{
		"result elsewhere": `UPDATE gateway_sessions SET record = replace(record, '"src":"` + l.out + `"', '"src":"` + keys + `"')`,
		"host socket":      `UPDATE gateway_sessions SET record = replace(record, '"src":"` + l.workspace + `"', '"src":"` + l.workspace + `","sockets":["x.sock"]')`,
	} {
		t.Run(name, func(t *testing.T) {
			db := restoreDB(t, old.db)
			res, err := db.SQL().Exec(edit)
			if n, _ := res.RowsAffected(); err != nil || n != 1 {
				t.Fatalf("forge the row: %v (%d rows)", err, n)
			}
			next := &Registry{Dir: filepath.Join(t.TempDir(), "sessions"), Sessions: &DBSessions{DB: db}}
			if _, err := next.Reattach(t.Context(), spec); err == nil || errors.Is(err, ErrNoSession) {
				t.Errorf("a forged stored session was taken back: %v", err)
			}
			if _, err := os.Stat(filepath.Join(next.Dir, l.id, sessionFile)); !os.IsNotExist(err) {
				t.Errorf("a forged stored session left a session.json (%v)", err)
			}
		})
	}
}

// TestStoredSession_FencedReplicaServesNothing: a replica whose Lease fence shut (the
// old leader woken up after the takeover) answers every request 503, so the worker retries and
// reaches the leader through the Service, and its readiness path says it is not the leader.
// Two leaders never both accept one Job's upload: the fenced one stores nothing, the leading
// one stores it, once.
func TestStoredSession_FencedReplicaServesNothing(t *testing.T) {
	old := startReplica(t, nil, nil)
	l := stageLayout(t, "01FENCEDOLD")
	spec := l.podSpec(t)
	s, err := old.reg.Export(t.Context(), spec)
	must(t, err)
	defer s.Close()
	if code, body := old.do(t, "GET", ReadyPath, "", nil); code != 200 || !strings.Contains(body, "leader") {
		t.Errorf("the leader's %s: %d %q, want 200", ReadyPath, code, body)
	}
	next := startReplica(t, restoreDB(t, old.db), old.gw)
	old.fence = errors.New("lease agora/agora-leader: not renewed in time")
	upload := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`})
	for _, p := range []string{"/session", "/mounts/bundle", "/streams/stdout"} {
		if code, _ := old.do(t, "GET", remote.RoutePrefix+l.id+p, s.Token, nil); code != 503 {
			t.Errorf("GET %s at the fenced replica: %d, want 503", p, code)
		}
	}
	if code, _ := old.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(upload)); code != 503 {
		t.Errorf("the upload at the fenced replica: %d, want 503", code)
	}
	if ents, _ := os.ReadDir(l.out); len(ents) != 0 {
		t.Errorf("the fenced replica stored the upload: %v", ents)
	}
	if code, _ := old.do(t, "GET", ReadyPath, "", nil); code != 503 {
		t.Errorf("the fenced replica's %s: %d, want 503", ReadyPath, code)
	}
	// The new leader's stage is its own disk's, at the same path.
	must(t, os.RemoveAll(l.out))
	must(t, os.Mkdir(l.out, 0o700))
	taken, err := next.reg.Reattach(t.Context(), spec)
	must(t, err)
	defer taken.Close()
	if code, msg := next.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(upload)); code != 204 {
		t.Fatalf("the upload at the leader: %d %q", code, msg)
	}
	// The fenced replica, asked again with the same bytes, still stores nothing.
	if code, _ := old.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/out", s.Token, bytes.NewReader(upload)); code != 503 {
		t.Errorf("the upload again at the fenced replica: %d, want 503", code)
	}
	if _, err := os.Stat(filepath.Join(old.reg.Dir, l.id, putPrefix+"out")); !os.IsNotExist(err) {
		t.Errorf("the fenced replica marked the mount uploaded (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(next.reg.Dir, l.id, putPrefix+"out")); err != nil {
		t.Errorf("the leader did not mark the mount uploaded: %v", err)
	}
}

// TestStoredSession_ExportNeedsTheStore: an export whose row cannot be stored (the fence of a
// replica that lost the Lease refuses the commit) fails and leaves no session, no file: a
// token is handed out only once it is in agora.db.
func TestStoredSession_ExportNeedsTheStore(t *testing.T) {
	r := startReplica(t, nil, nil)
	restore := store.SetFence(func() error { return errors.New("fence shut") })
	l := stageLayout(t, "01EXPORTFENCED")
	_, err := r.reg.Export(context.Background(), l.podSpec(t))
	restore()
	if err == nil || !strings.Contains(err.Error(), "fence shut") {
		t.Fatalf("export under a shut fence: %v, want the fence's refusal", err)
	}
	if _, err := os.Stat(filepath.Join(r.reg.Dir, l.id)); !os.IsNotExist(err) {
		t.Errorf("a refused export left its session directory (%v)", err)
	}
}

// memSessions is a SessionStore of one row, for the fuzz target: the row's bytes are what the
// fuzzer chose.
type memSessions struct{ sum, rec string }

func (m *memSessions) PutSession(context.Context, string, string, []byte) error { return nil }
func (m *memSessions) DeleteSession(context.Context, string, string) error      { return nil }
func (m *memSessions) Session(context.Context, string) (string, []byte, error) {
	return m.sum, []byte(m.rec), nil
}

// FuzzStoredRecord: whatever a stored row holds (agora.db is restored from object storage), it
// is parsed without panicking, and taking it back never yields a session that holds files
// the spec does not, reaches a host socket, fetches from anything but the spec's bind at the
// same destination, offers a result mount to fetch, takes its upload cap from the row, or
// writes its upload anywhere but the spec's result bind (once).
func FuzzStoredRecord(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	f.Add(sum, `{"version":1,"dispatch":"01FUZZ","token_sha256":"`+sum+`","mounts":[{"name":"out","dst":"/agora/out","writable":true,"result":true,"src":"/s/out"}],"files":1}`)
	f.Add(sum, `{"version":1,"dispatch":"01FUZZ","token_sha256":"`+sum+`","mounts":[{"name":"out","dst":"/agora/out","result":true,"src":"/etc"},{"name":"g","dst":"/agora/gateway","src":"/s/g","sockets":["a"]}]}`)
	f.Add(sum, `{"dispatch":"01OTHER"}`)
	f.Add(sum, `{"version":1,"dispatch":"01FUZZ","token_sha256":"`+sum+`","mounts":[{"name":"workspace","dst":"/agora/workspace","fetch":true,"src":"/etc"},{"name":"x","dst":"/agora/x","fetch":true,"src":"/s/workspace"}]}`)
	stage := f.TempDir()
	out, ws := filepath.Join(stage, "out"), filepath.Join(stage, "workspace")
	must(f, os.Mkdir(out, 0o700))
	must(f, os.Mkdir(ws, 0o700))
	f.Fuzz(func(t *testing.T, sum, rec string) {
		rec = strings.ReplaceAll(rec, "/s/", stage+"/")
		g := &Registry{Dir: filepath.Join(t.TempDir(), "sessions"), Sessions: &memSessions{sum, rec}}
		stored, err := g.storedRecord(context.Background(), "01FUZZ")
		if err != nil {
			return
		}
		spec := compute.Spec{ID: "01FUZZ", Binds: []compute.Bind{
			{Src: out, Dst: "/agora/out", Writable: true, Result: true},
			{Src: ws, Dst: "/agora/workspace", Writable: true},
		}}
		got, err := g.restore(context.Background(), spec, stored)
		if err != nil {
			return
		}
		if got.Files != 0 || !got.Restored || !got.Stored || got.MaxUploadBytes != 0 || got.Epoch != stored.Epoch+1 {
			t.Errorf("taken back: files %d restored %v stored %v", got.Files, got.Restored, got.Stored)
		}
		for _, m := range got.Mounts {
			// Only spec's own binds, at their own destinations.
			if len(m.Sockets) > 0 || (m.Result && (m.Src != out || m.Dst != "/agora/out" || m.Fetch)) ||
				(!m.Result && m.Src != "" && (m.Src != ws || m.Dst != "/agora/workspace" || !m.Fetch || m.File)) {
				t.Errorf("taken back a mount that reaches the host: %+v", m)
			}
		}
	})
}

// BenchmarkSessionRequest is the cost of the stored session on a worker's request: GET
// session over a kept-alive TLS connection, with the sessions' files alone (before) and with
// the row in agora.db read on every request (a replica's registry).
func BenchmarkSessionRequest(b *testing.B) {
	for _, stored := range []bool{false, true} {
		b.Run(map[bool]string{false: "files", true: "stored"}[stored], func(b *testing.B) {
			var g *gw
			if stored {
				g = startReplica(b, nil, nil).gw
			} else {
				g = startGateway(b)
			}
			l := stageLayout(b, "01BENCHSESSION")
			s := g.export(b, l)
			c := g.client(b, l.id, s.Token)
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.Info(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStoredSession_TakeoverWithoutTheStageRefusesTheFetch: a mount the pod fetched on the old
// leader that the new leader's spec does not bind again (or binds as another kind) stays one
// to fetch, and the gateway answers 410: a worker never starts on a stage it fetched empty.
// Fewer files than the row's serve none.
func TestStoredSession_TakeoverWithoutTheStageRefusesTheFetch(t *testing.T) {
	old := startReplica(t, nil, nil)
	l := stageLayout(t, "01NOSTAGE")
	s, err := old.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	next := startReplica(t, restoreDB(t, old.db), old.gw)
	old.gw.close()
	spec := l.podSpec(t)
	var binds []compute.Bind
	for _, b := range spec.Binds {
		switch b.Dst {
		case wire.WorkspacePath: // not made again
		case wire.BundlePath:
			b.Src = l.manifest // a file where the row had a directory
			binds = append(binds, b)
		default:
			binds = append(binds, b)
		}
	}
	spec.Binds, spec.Files = binds, nil
	taken, err := next.reg.Reattach(t.Context(), spec)
	must(t, err)
	defer taken.Close()
	info, err := next.client(t, l.id, s.Token).Info(t.Context())
	must(t, err)
	if info.Files != 0 {
		t.Errorf("taken back with no files in the spec: %d files served", info.Files)
	}
	for _, name := range []string{"workspace", "bundle"} {
		found := false
		for _, m := range info.Mounts {
			found = found || m.Name == name && m.Fetch
		}
		if !found {
			t.Errorf("mount %s is no longer one to fetch: the pod's init step would skip it and start on an empty stage", name)
		}
		if code, msg := next.do(t, "GET", remote.RoutePrefix+l.id+"/mounts/"+name, s.Token, nil); code != 410 {
			t.Errorf("fetching %s, not made again on the new leader: %d %q, want 410", name, code, msg)
		}
	}
	for _, m := range info.Mounts {
		if m.Dst != wire.BundlePath+"/"+wire.ManifestFile {
			continue
		}
		if code, msg := next.do(t, "GET", remote.RoutePrefix+l.id+"/mounts/"+m.Name, s.Token, nil); code != 200 {
			t.Errorf("the manifest, bound again: %d %q, want 200", code, msg)
		}
		return
	}
	t.Error("the manifest's mount is gone")
}
