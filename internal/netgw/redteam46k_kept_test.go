package netgw

// Attacks on the kept uploads of ADR 0009 (kept.go, upload.go's keep,
// stored.go's restoreUploads), as (a) a compromised worker holding its own token, (b) another
// dispatch's worker holding a different token, (c) someone racing requests, (d) someone who
// can write blobs into the bucket but not agora.db. Each test says what it tries; each
// asserts the safe behaviour.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/store"
)

// rt46kBucket is a blob store in a temp dir, and that dir (to plant blobs in, as attacker d).
func rt46kBucket(t *testing.T) (*blob.Store, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := blob.Open(dir)
	must(t, err)
	return b, dir
}

// rt46kPut sends a PUT without failing the test (callable from goroutines).
func rt46kPut(g *gw, path, token string, body io.Reader) (int, string, error) {
	req, err := http.NewRequest("PUT", g.url+path, body)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := g.httpClient().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func rt46kOut(id string) string { return remote.RoutePrefix + id + "/mounts/out" }

// rt46kTakeover: the old leader dies with its disk; a standby restored from its agora.db
// (forge, when set, changes the copy first, given the standby) takes the sessions of ls back,
// each with its out directory made again empty (prep, when set, then changes it).
func rt46kTakeover(t *testing.T, old *replica, bucket *blob.Store, forge func(next *replica), prep func(*layout), ls ...*layout) (*replica, []error) {
	t.Helper()
	restored := restoreKept(t, old.db)
	old.gw.close()
	next := keepingReplica(t, restored, old.gw, bucket, nil)
	if forge != nil {
		forge(next)
	}
	var errs []error
	for _, l := range ls {
		must(t, os.RemoveAll(l.out))
		must(t, os.Mkdir(l.out, 0o700))
		if prep != nil {
			prep(l)
		}
		taken, err := next.reg.Reattach(t.Context(), l.podSpec(t))
		if err == nil {
			t.Cleanup(func() { taken.Close() })
		}
		errs = append(errs, err)
	}
	return next, errs
}

// rt46kTree is every path under dir (relative) with a file's content, "<dir>" or "-> target".
func rt46kTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[rel] = "-> " + target
		case d.IsDir():
			got[rel] = "<dir>"
		default:
			b, _ := os.ReadFile(p)
			got[rel] = string(b)
		}
		return nil
	})
	return got
}

func rt46kSameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
	}
}

// rt46kRow is dispatch id's kept row for mount out in db: its sum and size, ok false when none.
func rt46kRow(t *testing.T, db *store.DB, id, mount string) (sum string, size int64, ok bool) {
	t.Helper()
	err := db.SQL().QueryRow(`SELECT sha256, size FROM gateway_uploads WHERE dispatch_id = ? AND mount = ?`, id, mount).Scan(&sum, &size)
	if err != nil {
		return "", 0, false
	}
	return sum, size, true
}

// rt46kBlobs lists the blob files of a bucket directory.
func rt46kBlobs(t *testing.T, bucketDir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(bucketDir, "sha256"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// rt46kKeptFiles lists kept-* files anywhere under root.
func rt46kKeptFiles(root string) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "kept-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// rt46kHookBlobs is the bucket with a hook run before each Put (the keep's first step, under
// the upload's and the dispatch's locks, before the row is inserted).
type rt46kHookBlobs struct {
	*blob.Store
	beforePut func()
}

func (h rt46kHookBlobs) Put(b []byte) (digest.Digest, error) {
	if h.beforePut != nil {
		h.beforePut()
	}
	return h.Store.Put(b)
}

// rt46kGate blocks the keep's wait for the replica until released, and says when it is
// reached (a hook that, unlike a sleep, orders the test's steps).
type rt46kGate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newRT46KGate() *rt46kGate {
	return &rt46kGate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *rt46kGate) wait(ctx context.Context, _ time.Time) error {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func rt46kWait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(4 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

type rt46kAnswer struct {
	code int
	msg  string
	err  error
}

// TestRedTeam46K_OtherDispatchCannotKeepOrReceive — attack (b): the worker of dispatch B,
// with B's token, tries to have its bytes kept as dispatch A's result (a PUT on A's route;
// KeepUpload for A under B's token hash, as a gateway bug would call it), and each dispatch's
// take-back must restore its own kept upload only. Dispatch C uploads A's very bytes (one
// blob, two rows): C's session ending must not drop A's row, nor give C's row to A.
func TestRedTeam46K_OtherDispatchCannotKeepOrReceive(t *testing.T) {
	bucket, _ := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucket, nil)
	a, b, c := stageLayout(t, "01RT46KCROSSA"), stageLayout(t, "01RT46KCROSSB"), stageLayout(t, "01RT46KCROSSC")
	sa, err := old.reg.Export(t.Context(), a.podSpec(t))
	must(t, err)
	defer sa.Close()
	sb, err := old.reg.Export(t.Context(), b.podSpec(t))
	must(t, err)
	defer sb.Close()
	sc, err := old.reg.Export(t.Context(), c.podSpec(t))
	must(t, err)

	forged := tarOf(t, tarEntry{name: "result.json", body: `{"from":"B"}`})
	if code, msg := old.do(t, "PUT", rt46kOut(a.id), sb.Token, bytes.NewReader(forged)); code != 403 {
		t.Errorf("B's token on A's upload route: %d %q, want 403", code, msg)
	}
	err = old.reg.Uploads.KeepUpload(t.Context(), a.id, hashToken(sb.Token), "out", hashOf(forged), forged)
	if !errors.Is(err, ErrNoSession) {
		t.Errorf("keeping bytes for A under B's token hash: %v, want ErrNoSession", err)
	}
	if _, _, ok := rt46kRow(t, old.db, a.id, "out"); ok {
		t.Fatal("a row was kept for A from B's attempts")
	}

	upA := tarOf(t, tarEntry{name: "result.json", body: `{"from":"A"}`})
	upB := tarOf(t, tarEntry{name: "result.json", body: `{"from":"B"}`}, tarEntry{name: "b-only", body: "b"})
	for _, u := range []struct {
		l    *layout
		tok  string
		body []byte
	}{{a, sa.Token, upA}, {b, sb.Token, upB}, {c, sc.Token, upA}} {
		if code, msg := old.do(t, "PUT", rt46kOut(u.l.id), u.tok, bytes.NewReader(u.body)); code != 204 {
			t.Fatalf("%s's upload: %d %q", u.l.id, code, msg)
		}
	}
	must(t, sc.Close()) // C's dispatch ends: its row goes, A's (the same blob) stays
	if _, _, ok := rt46kRow(t, old.db, c.id, "out"); ok {
		t.Error("C's row outlived its session")
	}
	if sum, _, ok := rt46kRow(t, old.db, a.id, "out"); !ok || sum != hashOf(upA) {
		t.Errorf("A's row after C's session ended: %q %v, want its own upload's", sum, ok)
	}

	next, errs := rt46kTakeover(t, old, bucket, nil, nil, a, b, c)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("take-backs: A %v, B %v", errs[0], errs[1])
	}
	if !errors.Is(errs[2], ErrNoSession) {
		t.Errorf("C's take-back after its session ended: %v, want ErrNoSession", errs[2])
	}
	rt46kSameTree(t, "A's out directory on the new leader", rt46kTree(t, a.out), map[string]string{"result.json": `{"from":"A"}`})
	rt46kSameTree(t, "B's out directory on the new leader", rt46kTree(t, b.out), map[string]string{"result.json": `{"from":"B"}`, "b-only": "b"})
	rt46kSameTree(t, "C's out directory on the new leader", rt46kTree(t, c.out), map[string]string{})
	if code, _ := next.do(t, "PUT", rt46kOut(a.id), sb.Token, bytes.NewReader(upB)); code != 403 {
		t.Errorf("B's token on A's route at the new leader: %d, want 403", code)
	}
	if code, _ := next.do(t, "PUT", rt46kOut(b.id), sb.Token, bytes.NewReader(upA)); code != 409 {
		t.Errorf("B uploading A's bytes over its own restored upload: %d, want 409", code)
	}
}

// TestRedTeam46K_ReexportDropsTheKeptUpload — a re-export (a new token) after a keep: the old
// token's kept upload must not survive, nor be restored under the new session by the next
// leader; the old token opens nothing there, the new token's worker uploads afresh. The
// session row replaced in place (an upsert of another token hash) drops it too.
func TestRedTeam46K_ReexportDropsTheKeptUpload(t *testing.T) {
	bucket, _ := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucket, nil)
	l := stageLayout(t, "01RT46KREEXPORT")
	s1, err := old.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s1.Close()
	up1 := tarOf(t, tarEntry{name: "result.json", body: `{"token":1}`})
	if code, msg := old.do(t, "PUT", rt46kOut(l.id), s1.Token, bytes.NewReader(up1)); code != 204 {
		t.Fatalf("upload under the first token: %d %q", code, msg)
	}
	s2, err := old.reg.Export(t.Context(), l.podSpec(t)) // a restarted supervisor: a new token
	must(t, err)
	defer s2.Close()
	if _, _, err := old.reg.Uploads.KeptUpload(t.Context(), l.id, "out"); !errors.Is(err, ErrNoUpload) {
		t.Errorf("the first token's kept upload after the re-export: %v, want none", err)
	}
	// The same through an upsert of the row with another token hash (PutSession's conflict
	// clause), which no Export path takes today but the trigger is there for.
	u := stageLayout(t, "01RT46KUPSERT")
	su, err := old.reg.Export(t.Context(), u.podSpec(t))
	must(t, err)
	defer su.Close()
	if code, msg := old.do(t, "PUT", rt46kOut(u.id), su.Token, bytes.NewReader(up1)); code != 204 {
		t.Fatalf("upload: %d %q", code, msg)
	}
	_, recJSON, err := old.reg.Sessions.Session(t.Context(), u.id)
	must(t, err)
	must(t, old.reg.Sessions.PutSession(t.Context(), u.id, strings.Repeat("c", 64), recJSON))
	if _, _, ok := rt46kRow(t, old.db, u.id, "out"); ok {
		t.Error("a kept upload survived its session row's token being replaced in place")
	}

	next, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
	if errs[0] != nil {
		t.Fatalf("take-back of the re-exported session: %v", errs[0])
	}
	rt46kSameTree(t, "the out directory of the re-exported session on the new leader", rt46kTree(t, l.out), map[string]string{})
	if code, _ := next.do(t, "PUT", rt46kOut(l.id), s1.Token, bytes.NewReader(up1)); code != 403 {
		t.Errorf("the first token's retry at the new leader: %d, want 403", code)
	}
	up2 := tarOf(t, tarEntry{name: "result.json", body: `{"token":2}`})
	if code, msg := next.do(t, "PUT", rt46kOut(l.id), s2.Token, bytes.NewReader(up2)); code != 204 {
		t.Errorf("the new token's upload at the new leader: %d %q, want 204", code, msg)
	}
	rt46kSameTree(t, "the out directory after the new token's upload", rt46kTree(t, l.out), map[string]string{"result.json": `{"token":2}`})
}

// TestRedTeam46K_SessionEndRacesTheKeep — the dispatch's end (its session row deleted in
// agora.db, as dispatch's trigger does, without the gateway's lock) and the reaper's Revoke
// (with it) race the keep: at no point may a kept row outlive its session, nor a takeover
// restore an upload for a session that ended.
func TestRedTeam46K_SessionEndRacesTheKeep(t *testing.T) {
	up := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`})
	t.Run("ended before the row is inserted", func(t *testing.T) {
		bucket, _ := rt46kBucket(t)
		old := keepingReplica(t, nil, nil, bucket, nil)
		l := stageLayout(t, "01RT46KENDBEFORE")
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		defer s.Close()
		ended := false
		old.reg.Uploads = &DBUploads{DB: old.db, Blobs: rt46kHookBlobs{Store: bucket, beforePut: func() {
			if !ended { // the dispatch's end lands after holdSession, before the insert
				ended = true
				if err := old.reg.Sessions.DeleteSession(context.Background(), l.id, ""); err != nil {
					t.Error(err)
				}
			}
		}}}
		if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code == 204 {
			t.Errorf("an upload kept for a session that ended before its row: %d %q", code, msg)
		}
		if _, _, ok := rt46kRow(t, old.db, l.id, "out"); ok {
			t.Error("a kept row was inserted for a session that had ended")
		}
		if code, _ := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code != 401 {
			t.Errorf("the worker's retry after its dispatch ended: %d, want 401", code)
		}
		_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
		if !errors.Is(errs[0], ErrNoSession) {
			t.Errorf("take-back of an ended session: %v, want ErrNoSession", errs[0])
		}
		rt46kSameTree(t, "the new leader's out directory", rt46kTree(t, l.out), map[string]string{})
	})
	t.Run("ended while the replica is awaited", func(t *testing.T) {
		bucket, _ := rt46kBucket(t)
		old := keepingReplica(t, nil, nil, bucket, nil)
		l := stageLayout(t, "01RT46KENDAFTER")
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		defer s.Close()
		old.reg.Uploads = &DBUploads{DB: old.db, Blobs: bucket, Replicated: func(ctx context.Context, _ time.Time) error {
			return old.reg.Sessions.DeleteSession(ctx, l.id, "")
		}}
		old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up))
		if _, _, ok := rt46kRow(t, old.db, l.id, "out"); ok {
			t.Error("the kept row outlived its session, ended while the replica was awaited")
		}
		_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
		if !errors.Is(errs[0], ErrNoSession) {
			t.Errorf("take-back of an ended session: %v, want ErrNoSession", errs[0])
		}
	})
	t.Run("revoked by the reaper during the keep", func(t *testing.T) {
		bucket, _ := rt46kBucket(t)
		gate := newRT46KGate()
		old := keepingReplica(t, nil, nil, bucket, gate.wait)
		l := stageLayout(t, "01RT46KREVOKEKEEP")
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		defer s.Close()
		answer := make(chan rt46kAnswer, 1)
		go func() {
			code, msg, err := rt46kPut(old.gw, rt46kOut(l.id), s.Token, bytes.NewReader(up))
			answer <- rt46kAnswer{code, msg, err}
		}()
		rt46kWait(t, gate.entered, "the keep's wait for the replica")
		revoked := make(chan error, 1)
		go func() { revoked <- old.reg.Revoke(context.Background(), l.id) }()
		select {
		case err := <-revoked:
			t.Errorf("Revoke finished (%v) while the upload held the dispatch's lock in its keep", err)
		default:
		}
		close(gate.release)
		a := <-answer
		if a.err != nil {
			t.Fatal(a.err)
		}
		if err := <-revoked; err != nil {
			t.Fatalf("revoke: %v", err)
		}
		if _, _, ok := rt46kRow(t, old.db, l.id, "out"); ok {
			t.Error("the kept row outlived the revocation")
		}
		_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
		if !errors.Is(errs[0], ErrNoSession) {
			t.Errorf("take-back of a revoked session: %v, want ErrNoSession", errs[0])
		}
		rt46kSameTree(t, "the new leader's out directory", rt46kTree(t, l.out), map[string]string{})
	})
}

// TestRedTeam46K_ConcurrentUploadsKeepOne — attack (c): uploads of different bytes racing for
// one mount, one of them held in its keep: the others are refused (503 while it runs, 409
// after), and exactly one body is placed, kept and restored — the one answered 204. Then a
// free-for-all of eight bodies at once, retried until final: one winner, everywhere.
func TestRedTeam46K_ConcurrentUploadsKeepOne(t *testing.T) {
	t.Run("one held in its keep", func(t *testing.T) {
		bucket, _ := rt46kBucket(t)
		gate := newRT46KGate()
		old := keepingReplica(t, nil, nil, bucket, gate.wait)
		l := stageLayout(t, "01RT46KRACEHELD")
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		defer s.Close()
		x1 := tarOf(t, tarEntry{name: "result.json", body: "1"}, tarEntry{name: "only-1", body: "1"})
		x2 := tarOf(t, tarEntry{name: "result.json", body: "2"}, tarEntry{name: "only-2", body: "2"})
		answer := make(chan rt46kAnswer, 1)
		go func() {
			code, msg, err := rt46kPut(old.gw, rt46kOut(l.id), s.Token, bytes.NewReader(x1))
			answer <- rt46kAnswer{code, msg, err}
		}()
		rt46kWait(t, gate.entered, "the first upload's keep")
		for _, body := range [][]byte{x2, x1} {
			if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(body)); code != 503 {
				t.Errorf("an upload while another is in its keep: %d %q, want 503 (busy)", code, msg)
			}
		}
		close(gate.release)
		if a := <-answer; a.err != nil || a.code != 204 {
			t.Fatalf("the held upload: %d %q %v, want 204", a.code, a.msg, a.err)
		}
		if code, _ := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(x2)); code != 409 {
			t.Errorf("the other bytes after the first was kept: %d, want 409", code)
		}
		if sum, _, ok := rt46kRow(t, old.db, l.id, "out"); !ok || sum != hashOf(x1) {
			t.Errorf("the kept row: %q %v, want the 204's body", sum, ok)
		}
		rt46kSameTree(t, "the leader's out directory", rt46kTree(t, l.out), map[string]string{"result.json": "1", "only-1": "1"})
		_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
		must(t, errs[0])
		rt46kSameTree(t, "the new leader's out directory", rt46kTree(t, l.out), map[string]string{"result.json": "1", "only-1": "1"})
	})
	t.Run("eight at once", func(t *testing.T) {
		bucket, _ := rt46kBucket(t)
		old := keepingReplica(t, nil, nil, bucket, nil)
		l := stageLayout(t, "01RT46KRACEEIGHT")
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		defer s.Close()
		const n = 8
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = tarOf(t, tarEntry{name: "result.json", body: strconv.Itoa(i)}, tarEntry{name: "only-" + strconv.Itoa(i), body: strings.Repeat("x", 64<<10)})
		}
		codes := make([]int, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				for try := 0; try < 200; try++ {
					code, _, err := rt46kPut(old.gw, rt46kOut(l.id), s.Token, bytes.NewReader(bodies[i]))
					if err == nil && code != 503 {
						codes[i] = code
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, c := range codes {
			switch {
			case c == 204 && winner >= 0:
				t.Errorf("bodies %d and %d were both answered 204", winner, i)
			case c == 204:
				winner = i
			case c != 409:
				t.Errorf("body %d: final answer %d, want 204 or 409", i, c)
			}
		}
		if winner < 0 {
			t.Fatalf("no body won: %v", codes)
		}
		w := strconv.Itoa(winner)
		want := map[string]string{"result.json": w, "only-" + w: strings.Repeat("x", 64<<10)}
		if sum, _, ok := rt46kRow(t, old.db, l.id, "out"); !ok || sum != hashOf(bodies[winner]) {
			t.Errorf("the kept row is not the winner's body (%v)", ok)
		}
		rt46kSameTree(t, "the leader's out directory", rt46kTree(t, l.out), want)
		_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
		must(t, errs[0])
		rt46kSameTree(t, "the new leader's out directory", rt46kTree(t, l.out), want)
	})
}

// TestRedTeam46K_TrailingJunkKeptAsSent — attack (a): a tar valid for extraction whose raw
// bytes carry junk after its end marker, the junk itself a second tar (evil.txt) that a
// lenient reader would extract. The kept blob is exactly the bytes answered (so only they
// finish it at the new leader); the junk is never extracted there; the tar without its junk
// is other bytes (409); junk past the trailer cap is refused and kept nowhere.
func TestRedTeam46K_TrailingJunkKeptAsSent(t *testing.T) {
	bucketStore, bucketDir := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucketStore, nil)
	l := stageLayout(t, "01RT46KJUNK")
	s, err := old.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	clean := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`})
	junk := append(tarOf(t, tarEntry{name: "evil.txt", body: "from the junk"}), bytes.Repeat([]byte{0xEE}, 3000)...)
	body := append(append([]byte{}, clean...), junk...)
	if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(body)); code != 204 {
		t.Fatalf("upload with trailing junk: %d %q", code, msg)
	}
	sum, size, ok := rt46kRow(t, old.db, l.id, "out")
	if !ok || sum != hashOf(body) || size != int64(len(body)) {
		t.Errorf("the kept row: %q %d %v, want the body as sent (%d bytes)", sum, size, ok, len(body))
	}
	if _, b, err := old.reg.Uploads.KeptUpload(t.Context(), l.id, "out"); err != nil || !bytes.Equal(b, body) {
		t.Errorf("the kept blob is not the body as sent (%v)", err)
	}

	// Junk over the trailer cap: refused on the leader, and nothing of it kept.
	over := stageLayout(t, "01RT46KJUNKOVER")
	so, err := old.reg.Export(t.Context(), over.podSpec(t))
	must(t, err)
	defer so.Close()
	before := len(rt46kBlobs(t, bucketDir))
	big := append(append([]byte{}, clean...), bytes.Repeat([]byte{0xEE}, maxTrailer+1024)...)
	if code, _ := old.do(t, "PUT", rt46kOut(over.id), so.Token, bytes.NewReader(big)); code != 422 {
		t.Errorf("junk over the trailer cap: %d, want 422", code)
	}
	if _, _, ok := rt46kRow(t, old.db, over.id, "out"); ok || len(rt46kBlobs(t, bucketDir)) != before {
		t.Error("an upload refused for its junk was kept")
	}

	next, errs := rt46kTakeover(t, old, bucketStore, nil, nil, l)
	must(t, errs[0])
	rt46kSameTree(t, "the new leader's out directory", rt46kTree(t, l.out), map[string]string{"result.json": `{"status":"ok"}`})
	if code, _ := next.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(body)); code != 204 {
		t.Errorf("the worker's retry of the bytes as sent: %d, want 204", code)
	}
	if code, _ := next.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(clean)); code != 409 {
		t.Errorf("the same tar without its junk: %d, want 409 (other bytes)", code)
	}
}

// TestRedTeam46K_RefusedUploadsAreNeverKept — attack (a): uploads the leader refuses (a
// symlink, .., an absolute name, a hard link, over the entries cap, over the session's byte
// cap, not a tar) must leave no row and no blob, so the next leader never extracts them; nor
// a kept-* body in the session directory.
func TestRedTeam46K_RefusedUploadsAreNeverKept(t *testing.T) {
	bucketStore, bucketDir := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucketStore, nil)
	many := make([]tarEntry, MaxUploadEntries+1)
	for i := range many {
		many[i] = tarEntry{name: "f" + strconv.Itoa(i)}
	}
	cases := []struct {
		name string
		body []byte
		disk int64
	}{
		{name: "symlink", body: tarOf(t, tarEntry{name: "result.json", link: "/etc/shadow", typ: tar.TypeSymlink})},
		{name: "symlink then through it", body: tarOf(t, tarEntry{name: "d", link: "/tmp", typ: tar.TypeSymlink}, tarEntry{name: "d/x", body: "x"})},
		{name: "dotdot", body: tarOf(t, tarEntry{name: "ok", body: "1"}, tarEntry{name: "../escape", body: "x"})},
		{name: "absolute", body: tarOf(t, tarEntry{name: "/tmp/rt46k-abs", body: "x"})},
		{name: "hardlink", body: tarOf(t, tarEntry{name: "a", body: "x"}, tarEntry{name: "b", link: "/etc/passwd", typ: tar.TypeLink})},
		{name: "entries", body: tarOf(t, many...)},
		{name: "bytes", body: tarOf(t, tarEntry{name: "a", body: strings.Repeat("x", 4096)}), disk: 1024},
		{name: "garbage", body: []byte(strings.Repeat("garbage", 300))},
	}
	var ls []*layout
	for _, tc := range cases {
		l := stageLayout(t, "01RT46KREFUSED"+strings.ToUpper(strings.ReplaceAll(tc.name, " ", "")))
		ls = append(ls, l)
		spec := l.podSpec(t)
		spec.Limits.Disk = tc.disk
		s, err := old.reg.Export(t.Context(), spec)
		must(t, err)
		defer s.Close()
		code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(tc.body))
		if code == 204 {
			t.Errorf("%s: the leader stored it (%q)", tc.name, msg)
		}
		if _, _, ok := rt46kRow(t, old.db, l.id, "out"); ok {
			t.Errorf("%s: refused, and kept all the same", tc.name)
		}
		sd, _ := sessionDir(old.reg.Dir, l.id)
		if k := rt46kKeptFiles(sd); len(k) != 0 {
			t.Errorf("%s: kept bodies left in the session directory: %v", tc.name, k)
		}
	}
	if b := rt46kBlobs(t, bucketDir); len(b) != 0 {
		t.Errorf("refused uploads reached the bucket: %v", b)
	}
	_, errs := rt46kTakeover(t, old, bucketStore, nil, nil, ls...)
	for i, l := range ls {
		if errs[i] != nil {
			t.Errorf("%s: take-back: %v", cases[i].name, errs[i])
		}
		rt46kSameTree(t, cases[i].name+": the new leader's out directory", rt46kTree(t, l.out), map[string]string{})
	}
	if _, err := os.Lstat("/tmp/rt46k-abs"); err == nil {
		t.Error("/tmp/rt46k-abs was written")
	}
}

// TestRedTeam46K_KeptBodyPrivateAndRemoved — the body the gateway tees (kept-<mount>-*) is a
// 0600 file directly in the 0700 session directory while it is kept, and is gone after every
// outcome: stored (204), not kept (503), interrupted by the worker (400), the session revoked
// while the body came (401). One a killed gateway left goes with its session.
func TestRedTeam46K_KeptBodyPrivateAndRemoved(t *testing.T) {
	bucket, _ := rt46kBucket(t)
	var fail bool
	var seen []string
	var mu sync.Mutex
	var g *replica
	var sd string
	g = keepingReplica(t, nil, nil, bucket, func(context.Context, time.Time) error {
		mu.Lock()
		defer mu.Unlock()
		fi, err := os.Stat(sd)
		if err != nil || fi.Mode().Perm() != 0o700 {
			seen = append(seen, fmt.Sprintf("session directory %v %v", fi, err))
		}
		for _, p := range rt46kKeptFiles(g.home) {
			fi, err := os.Lstat(p)
			switch {
			case err != nil:
			case filepath.Dir(p) != sd:
				seen = append(seen, "kept body outside the session directory: "+p)
			case !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600:
				seen = append(seen, fmt.Sprintf("kept body %s of mode %v", p, fi.Mode()))
			default:
				seen = append(seen, "ok")
			}
		}
		if fail {
			return errors.New("the replica is behind")
		}
		return nil
	})
	l := stageLayout(t, "01RT46KTEMP")
	s, err := g.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	sd, _ = sessionDir(g.reg.Dir, l.id)
	up := tarOf(t, tarEntry{name: "result.json", body: "{}"})

	// Interrupted: half a tar, then the worker's connection fails.
	pr, pw := io.Pipe()
	done := make(chan rt46kAnswer, 1)
	go func() {
		code, msg, err := rt46kPut(g.gw, rt46kOut(l.id), s.Token, pr)
		done <- rt46kAnswer{code, msg, err}
	}()
	pw.Write(up[:700])
	rt46kWaitFor(t, "the interrupted upload's kept body", func() bool { return len(rt46kKeptFiles(sd)) == 1 })
	pw.CloseWithError(errors.New("the worker died"))
	<-done
	// Not kept (the replica behind), then stored: each answered only once the one before has
	// released the mount (so its kept body is gone: discard runs before the unlock).
	mu.Lock()
	fail = true
	mu.Unlock()
	for try := 0; ; try++ {
		c, msg, err := rt46kPut(g.gw, rt46kOut(l.id), s.Token, bytes.NewReader(up))
		must(t, err)
		if c == 503 && strings.Contains(msg, "in progress") && try < 1000 {
			continue // the interrupted one still holds the mount
		}
		if c != 503 {
			t.Fatalf("an upload whose keep fails: %d %q, want 503", c, msg)
		}
		break
	}
	if k := rt46kKeptFiles(g.home); len(k) != 0 {
		t.Errorf("kept bodies left after an interrupted upload and a failed keep: %v", k)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if code, msg := g.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code != 204 {
		t.Fatalf("the same bytes once kept: %d %q", code, msg)
	}
	if k := rt46kKeptFiles(g.home); len(k) != 0 {
		t.Errorf("kept bodies left after a stored upload: %v", k)
	}
	mu.Lock()
	for _, s := range seen {
		if s != "ok" {
			t.Error(s)
		}
	}
	if len(seen) == 0 {
		t.Error("no kept body was seen during the keeps")
	}
	mu.Unlock()

	// Revoked while the body came: 401, nothing left.
	r := stageLayout(t, "01RT46KTEMPREVOKE")
	sr, err := g.reg.Export(t.Context(), r.podSpec(t))
	must(t, err)
	defer sr.Close()
	rsd, _ := sessionDir(g.reg.Dir, r.id)
	pr, pw = io.Pipe()
	go func() {
		code, msg, err := rt46kPut(g.gw, rt46kOut(r.id), sr.Token, pr)
		done <- rt46kAnswer{code, msg, err}
	}()
	pw.Write(up[:700])
	rt46kWaitFor(t, "the revoked upload's kept body", func() bool { return len(rt46kKeptFiles(rsd)) == 1 })
	must(t, g.reg.Revoke(t.Context(), r.id))
	pw.Write(up[700:])
	pw.Close()
	if a := <-done; a.err != nil || a.code != 401 {
		t.Errorf("an upload whose session was revoked while it came: %d %q %v, want 401", a.code, a.msg, a.err)
	}
	if _, _, ok := rt46kRow(t, g.db, r.id, "out"); ok {
		t.Error("an upload of a revoked session was kept")
	}
	if k := rt46kKeptFiles(g.home); len(k) != 0 {
		t.Errorf("kept bodies left after a revoked upload: %v", k)
	}

	// A kept body a killed gateway left goes with its session.
	c := stageLayout(t, "01RT46KTEMPCRASH")
	sc, err := g.reg.Export(t.Context(), c.podSpec(t))
	must(t, err)
	csd, _ := sessionDir(g.reg.Dir, c.id)
	must(t, os.WriteFile(filepath.Join(csd, "kept-out-1234"), bytes.Repeat([]byte("k"), 4096), 0o600))
	must(t, sc.Close())
	if k := rt46kKeptFiles(g.home); len(k) != 0 {
		t.Errorf("a crashed gateway's kept body outlived its session: %v", k)
	}
}

// rt46kWaitFor waits for cond, a state on disk the gateway reaches (no hook there: the upload
// handler's first step), for at most 4 s (agoratest.WaitFor).
func rt46kWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	agoratest.WaitFor(t, 4*time.Second, what, cond)
}

// TestRedTeam46K_KeptBodyNameStaysInTheSessionDir — a crafted mount name must not put the
// teed body outside the session directory: names with a separator or dots are refused by the
// route (so never reach the upload), and newKeptBody itself puts any name's body in sd or
// fails.
func TestRedTeam46K_KeptBodyNameStaysInTheSessionDir(t *testing.T) {
	for _, p := range []string{"01X/mounts/..", "01X/mounts/../x", "01X/mounts/a%2F..%2Fb", "01X/mounts/OUT", "01X/mounts/" + strings.Repeat("a", 41)} {
		if _, err := parseRoute(remote.RoutePrefix + p); err == nil {
			t.Errorf("route %q parsed", p)
		}
	}
	root := t.TempDir()
	sd := filepath.Join(root, "sessions", "01X")
	must(t, os.MkdirAll(sd, 0o700))
	for _, name := range []string{"../escape", "../../escape", "a/b", "/abs", "..", "x\x00y"} {
		k, err := newKeptBody(sd, name, MaxKeptUpload)
		if err != nil {
			continue
		}
		if filepath.Dir(k.f.Name()) != sd {
			t.Errorf("mount %q: kept body at %s, outside %s", name, k.f.Name(), sd)
		}
		k.discard()
	}
	var stray []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			stray = append(stray, p)
		}
		return nil
	})
	if len(stray) != 0 {
		t.Errorf("files left by crafted names: %v", stray)
	}
}

// TestRedTeam46K_RestoreIntoAnOutDirWithContent — the new leader's out directory already
// holds entries when the kept upload is restored (stale ones of the same names, a symlink
// to a directory outside where the upload has a directory): the kept upload's entries win,
// and no symlink is followed. (Entries of other names stay: netgw does not empty the out
// directory; the adopter makes a takeover's stage afresh, dispatch/adopt.go restage, so a
// real take-back finds it empty. Logged, not asserted.)
func TestRedTeam46K_RestoreIntoAnOutDirWithContent(t *testing.T) {
	bucket, _ := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucket, nil)
	l := stageLayout(t, "01RT46KDIRTYOUT")
	s, err := old.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	up := tarOf(t, tarEntry{name: "result.json", body: "kept"}, tarEntry{name: "dir/", typ: tar.TypeDir}, tarEntry{name: "dir/inner", body: "kept inner"})
	if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code != 204 {
		t.Fatalf("upload: %d %q", code, msg)
	}
	victim := t.TempDir()
	_, errs := rt46kTakeover(t, old, bucket, nil, func(l *layout) {
		must(t, os.WriteFile(filepath.Join(l.out, "result.json"), []byte("stale"), 0o600))
		must(t, os.Symlink(victim, filepath.Join(l.out, "dir")))
		must(t, os.WriteFile(filepath.Join(l.out, "stale-only"), []byte("stale"), 0o600))
	}, l)
	must(t, errs[0])
	got := rt46kTree(t, l.out)
	for k, v := range map[string]string{"result.json": "kept", "dir": "<dir>", "dir/inner": "kept inner"} {
		if got[k] != v {
			t.Errorf("%s in the new leader's out directory: %q, want the kept upload's %q", k, got[k], v)
		}
	}
	if v := rt46kTree(t, victim); len(v) != 0 {
		t.Errorf("the restore wrote through a symlink in the out directory: %v", v)
	}
	if _, ok := got["stale-only"]; ok {
		t.Log("note: an entry of another name stays beside the restored upload (the adopter's restage empties the out directory)")
	}
}

// TestRedTeam46K_RowForANonResultMountIsIgnored — a worker cannot have a fetch mount's upload
// kept (PUT on it is refused, no row); and a row for a mount that is not a result mount (the
// workspace, the bundle, a name the record lacks), its blob planted in the bucket, is never
// extracted anywhere at the take-back. (A forged row needs agora.db: defence in depth.)
func TestRedTeam46K_RowForANonResultMountIsIgnored(t *testing.T) {
	bucket, _ := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucket, nil)
	l := stageLayout(t, "01RT46KNONRESULT")
	s, err := old.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	planted := tarOf(t, tarEntry{name: "planted.txt", body: "planted"})
	for _, m := range []string{"workspace", "bundle"} {
		if code, _ := old.do(t, "PUT", remote.RoutePrefix+l.id+"/mounts/"+m, s.Token, bytes.NewReader(planted)); code == 204 {
			t.Errorf("an upload to the %s mount was stored", m)
		}
		if _, _, ok := rt46kRow(t, old.db, l.id, m); ok {
			t.Errorf("a row was kept for the %s mount", m)
		}
	}
	up := tarOf(t, tarEntry{name: "result.json", body: "{}"})
	if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code != 204 {
		t.Fatalf("upload: %d %q", code, msg)
	}
	_, err = bucket.Put(planted)
	must(t, err)
	wsBefore := rt46kTree(t, l.workspace)
	bundleBefore := rt46kTree(t, l.bundle)
	next, errs := rt46kTakeover(t, old, bucket, func(next *replica) {
		for _, m := range []string{"workspace", "bundle", "ghost"} {
			_, err := next.db.SQL().Exec(`INSERT INTO gateway_uploads (dispatch_id, mount, sha256, size, created_at) VALUES (?, ?, ?, ?, 0)`,
				l.id, m, hashOf(planted), len(planted))
			must(t, err)
		}
	}, nil, l)
	must(t, errs[0])
	rt46kSameTree(t, "the workspace after the take-back", rt46kTree(t, l.workspace), wsBefore)
	rt46kSameTree(t, "the bundle after the take-back", rt46kTree(t, l.bundle), bundleBefore)
	rt46kSameTree(t, "the out directory after the take-back", rt46kTree(t, l.out), map[string]string{"result.json": "{}"})
	nsd, _ := sessionDir(next.reg.Dir, l.id)
	for _, m := range []string{"workspace", "bundle", "ghost"} {
		if _, err := os.Lstat(filepath.Join(nsd, putPrefix+m)); err == nil {
			t.Errorf("an upload mark for the %s mount", m)
		}
	}
}

// rt46kMemRemote is a bucket as S3 is: PutBlob overwrites, GetBlob refuses over max.
type rt46kMemRemote struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (r *rt46kMemRemote) Where() string { return "mem://rt46k" }
func (r *rt46kMemRemote) PutBlob(_ context.Context, name string, b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = append([]byte{}, b...)
	return nil
}
func (r *rt46kMemRemote) GetBlob(_ context.Context, name string, max int64) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.m[name]
	if !ok {
		return nil, false, nil
	}
	if int64(len(b)) > max {
		return nil, true, fmt.Errorf("%s: %d bytes, over %d", name, len(b), max)
	}
	return append([]byte{}, b...), true, nil
}
func (r *rt46kMemRemote) HasBlob(_ context.Context, name string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[name]
	return ok, nil
}

// TestRedTeam46K_BucketWriterCannotSwapTheKeptUpload — attack (d), who writes blobs but not
// agora.db: after the keep, the kept blob made longer (its right bytes and more), or deleted;
// before the keep, other bytes planted under the sum the upload will have (the worker's
// output predicted). Never may the take-back extract other bytes than the ones the row names;
// it fails (the dispatch ends lost) instead. With a bucket that overwrites on put (S3), the
// planted blob is replaced by the keep and the take-back restores the real upload.
func TestRedTeam46K_BucketWriterCannotSwapTheKeptUpload(t *testing.T) {
	up := tarOf(t, tarEntry{name: "result.json", body: `{"real":true}`})
	forged := tarOf(t, tarEntry{name: "result.json", body: `{"forged":true}`})
	sum := hashOf(up)
	for name, attack := range map[string]struct {
		before, after func(t *testing.T, blobPath string)
	}{
		"longer blob under the right sum": {after: func(t *testing.T, p string) {
			must(t, os.Chmod(p, 0o600))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			f.Write(bytes.Repeat([]byte{0}, 1024))
			f.Write(forged)
			must(t, f.Close())
		}},
		"blob deleted": {after: func(t *testing.T, p string) { must(t, os.Remove(p)) }},
		"other bytes planted before the keep": {before: func(t *testing.T, p string) {
			must(t, os.MkdirAll(filepath.Dir(p), 0o700))
			must(t, os.WriteFile(p, forged, 0o400))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			bucket, bucketDir := rt46kBucket(t)
			p := filepath.Join(bucketDir, "sha256", sum[:2], sum)
			old := keepingReplica(t, nil, nil, bucket, nil)
			l := stageLayout(t, "01RT46KBUCKET")
			s, err := old.reg.Export(t.Context(), l.podSpec(t))
			must(t, err)
			defer s.Close()
			if attack.before != nil {
				attack.before(t, p)
			}
			code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up))
			if attack.after != nil {
				if code != 204 {
					t.Fatalf("upload: %d %q", code, msg)
				}
				attack.after(t, p)
			} else {
				t.Logf("the keep over a planted blob was answered %d (a local store trusts what its path holds; S3 overwrites)", code)
			}
			_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
			got := rt46kTree(t, l.out)
			if errs[0] == nil && got["result.json"] != `{"real":true}` {
				t.Errorf("the take-back restored %v", got)
			}
			if errs[0] != nil && len(got) != 0 {
				t.Errorf("a refused take-back left %v in the out directory", got)
			}
			if got["result.json"] == `{"forged":true}` {
				t.Error("the bucket writer's bytes were restored as the result")
			}
		})
	}
	t.Run("planted before the keep in an S3-like bucket", func(t *testing.T) {
		mem := &rt46kMemRemote{m: map[string][]byte{}}
		bucket := blob.OpenRemote(mem)
		mem.PutBlob(t.Context(), "sha256/"+sum[:2]+"/"+sum, forged)
		old := keepingReplica(t, nil, nil, bucket, nil)
		l := stageLayout(t, "01RT46KBUCKETS3")
		s, err := old.reg.Export(t.Context(), l.podSpec(t))
		must(t, err)
		defer s.Close()
		if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code != 204 {
			t.Fatalf("upload: %d %q", code, msg)
		}
		_, errs := rt46kTakeover(t, old, bucket, nil, nil, l)
		must(t, errs[0])
		rt46kSameTree(t, "the new leader's out directory", rt46kTree(t, l.out), map[string]string{"result.json": `{"real":true}`})
	})
}

// rt46kPAXInflated is a valid tar of one small file after dirs empty directories, each
// carrying a PAX record of pad bytes: metadata, which no byte cap counts (extractInto caps
// regular files' sizes), and which archive/tar reads and drops a header at a time.
func rt46kPAXInflated(t *testing.T, dirs, pad int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	big := strings.Repeat("A", pad)
	for i := range dirs {
		must(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/", i), Typeflag: tar.TypeDir, Mode: 0o755,
			Format: tar.FormatPAX, PAXRecords: map[string]string{"comment": big}}))
	}
	must(t, tw.WriteHeader(&tar.Header{Name: "result.json", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644}))
	io.WriteString(tw, "{}")
	must(t, tw.Close())
	return b.Bytes()
}

// TestRedTeam46K_MetadataInflatedUploadKeptBeyondItsCap — attack (a): a worker whose session
// caps its upload at 64 KiB (the target's disk) sends a valid tar of one 2-byte file behind
// 16 directories each carrying a 1 MiB PAX record: 16 MiB of body that the byte cap, which
// counts regular files only, never sees. Before ADR 0009 those bytes were parsed and dropped
// a header at a time; now the gateway tees every body byte to the session directory (the
// gateway's volume, outside the dispatch's disk quota), reads the whole of it into memory
// and puts it in the bucket (where no retention ever purges it: no dispatch record names the
// raw tar). The kept copy must stay within the session's cap plus the framing a tar of that
// many entries needs (or the upload be refused / not kept). Scaled up, one worker with a
// 64 KiB disk makes its leader write and hold 1 GiB (MaxKeptUpload) per upload.
func TestRedTeam46K_MetadataInflatedUploadKeptBeyondItsCap(t *testing.T) {
	const (
		capBytes = 64 << 10
		dirs     = 16
	)
	bucket, bucketDir := rt46kBucket(t)
	var teedMax atomic.Int64
	var g *replica
	g = keepingReplica(t, nil, nil, bucket, func(context.Context, time.Time) error {
		for _, p := range rt46kKeptFiles(g.home) {
			if fi, err := os.Stat(p); err == nil && fi.Size() > teedMax.Load() {
				teedMax.Store(fi.Size())
			}
		}
		return nil
	})
	l := stageLayout(t, "01RT46KPAXINFLATE")
	spec := l.podSpec(t)
	spec.Limits.Disk = capBytes
	s, err := g.reg.Export(t.Context(), spec)
	must(t, err)
	defer s.Close()
	body := rt46kPAXInflated(t, dirs, 1<<20-64)
	code, msg := g.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(body))
	teed := teedMax.Load()
	// What a tar within the cap may need beyond its files' bytes: per entry a header, a block
	// of padding and a PAX header for a long name; the end marker; the trailer cap.
	limit := int64(capBytes + maxTrailer + (dirs+2)*4096)
	var inBucket int64
	for _, p := range rt46kBlobs(t, bucketDir) {
		if fi, err := os.Stat(p); err == nil {
			inBucket += fi.Size()
		}
	}
	_, size, kept := rt46kRow(t, g.db, l.id, "out")
	t.Logf("session cap %d B; body %d B; answer %d; teed to the session directory %d B; kept row %v of %d B; bucket %d B",
		capBytes, len(body), code, teed, kept, size, inBucket)
	if teed > limit || inBucket > limit || size > limit {
		t.Errorf("HOLE: an upload capped at %d bytes (answered %d %q) cost the leader %d bytes on its volume and %d in the bucket (kept row %d B), over the %d a tar within its cap needs",
			capBytes, code, msg, teed, inBucket, size, limit)
	}
}

// TestRedTeam46K_ForgedMountNameWritesNoMarkOutsideTheSessionDir — defence in depth (needs
// agora.db rows, which FuzzStoredRecord already treats as hostile: "whatever a stored row
// holds"): a stored session whose result mount keeps its real destination and source but is
// renamed "/../../../../rt46k-victim", with a kept row of that name. restore checks the result
// mount's destination and source, never its name; restoreUploads then writes the upload mark
// at filepath.Join(sd, "put-"+name): AGORA_HOME/rt46k-victim, a file of the host replaced
// by "stored <sum> <size>". The take-back must refuse the name or keep the mark in sd.
func TestRedTeam46K_ForgedMountNameWritesNoMarkOutsideTheSessionDir(t *testing.T) {
	bucket, _ := rt46kBucket(t)
	old := keepingReplica(t, nil, nil, bucket, nil)
	l := stageLayout(t, "01RT46KMOUNTNAME")
	s, err := old.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	up := tarOf(t, tarEntry{name: "result.json", body: "{}"})
	if code, msg := old.do(t, "PUT", rt46kOut(l.id), s.Token, bytes.NewReader(up)); code != 204 {
		t.Fatalf("upload: %d %q", code, msg)
	}
	const evil = "/../../../../rt46k-victim"
	var victim string
	_, errs := rt46kTakeover(t, old, bucket, func(next *replica) {
		victim = filepath.Join(next.home, "rt46k-victim")
		must(t, os.WriteFile(victim, []byte("the host's own file"), 0o600))
		var recJSON string
		must(t, next.db.SQL().QueryRow(`SELECT record FROM gateway_sessions WHERE dispatch_id = ?`, l.id).Scan(&recJSON))
		var rec map[string]any
		must(t, json.Unmarshal([]byte(recJSON), &rec))
		for _, m := range rec["mounts"].([]any) {
			if mm := m.(map[string]any); mm["name"] == "out" {
				mm["name"] = evil
			}
		}
		b, err := json.Marshal(rec)
		must(t, err)
		_, err = next.db.SQL().Exec(`UPDATE gateway_sessions SET record = ? WHERE dispatch_id = ?`, string(b), l.id)
		must(t, err)
		_, err = next.db.SQL().Exec(`UPDATE gateway_uploads SET mount = ? WHERE dispatch_id = ?`, evil, l.id)
		must(t, err)
	}, nil, l)
	if b, err := os.ReadFile(victim); err != nil || string(b) != "the host's own file" {
		t.Errorf("HOLE: a stored mount name led the take-back (err %v) to replace %s with %q", errs[0], victim, b)
	}
}
