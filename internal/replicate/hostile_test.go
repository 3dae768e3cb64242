package replicate_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// replicated makes a generation of three syncs of an "agora" database under identity in c's
// bucket and returns the names of its segments, in order.
func replicated(t *testing.T, c *s3.Client, identity string, key []byte) []string {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 50)
	r, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: key, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, db, 50, 60)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 60, 70)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := c.List(ctx, "replica/agora/"+r.Status().Generation+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 {
		t.Fatalf("%d segments, want 3: %v", len(names), names)
	}
	return names
}

// restoreFails restores and wants an error containing each of want, and no database left.
func restoreFails(t *testing.T, c *s3.Client, identity string, want ...string) error {
	t.Helper()
	out := filepath.Join(t.TempDir(), "agora.db")
	_, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out})
	if err == nil {
		t.Fatalf("the restore succeeded (%d rows), want an error naming %q", len(rows(t, out)), want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Errorf("a failed restore left %s", out)
	}
	return err
}

// TestRestore_DamagedReplica: a truncated, altered, missing or swapped segment is a clear error
// naming the object, never a silently short restore.
func TestRestore_DamagedReplica(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, c *s3.Client, names []string)
		want   []string
	}{
		{"truncated last", func(t *testing.T, c *s3.Client, names []string) {
			b := get(t, c, names[2])
			put(t, c, names[2], b[:len(b)/2])
		}, []string{"corrupt", "truncated, altered", names2(2)}},
		{"truncated to nothing", func(t *testing.T, c *s3.Client, names []string) {
			put(t, c, names[1], nil)
		}, []string{"corrupt", names2(1)}},
		{"byte flipped", func(t *testing.T, c *s3.Client, names []string) {
			b := bytes.Clone(get(t, c, names[0]))
			b[len(b)/2] ^= 1
			put(t, c, names[0], b)
		}, []string{"corrupt", names2(0)}},
		{"middle segment deleted", func(t *testing.T, c *s3.Client, names []string) {
			if err := c.Delete(t.Context(), names[1], ""); err != nil {
				t.Fatal(err)
			}
		}, []string{"no segment 1", "incomplete"}},
		{"segment replaced by its successor", func(t *testing.T, c *s3.Client, names []string) {
			put(t, c, names[1], get(t, c, names[2]))
		}, []string{"corrupt", names2(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, c := bucket(t)
			names := replicated(t, c, identity, testKey)
			tc.damage(t, c, names)
			restoreFails(t, c, identity, tc.want...)
		})
	}
}

// names2 is the tail of the i-th segment's name, as errors show it.
func names2(i int) string { return "/000000000000000" + string(rune('0'+i)) }

func get(t *testing.T, c *s3.Client, name string) []byte {
	t.Helper()
	b, _, err := c.Get(t.Context(), name, "", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t *testing.T, c *s3.Client, name string, b []byte) {
	t.Helper()
	if _, err := c.Put(t.Context(), name, b, false, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRestore_AnotherHomesReplica: attack: the bucket (misconfigured, or hostile) answers under
// this home's prefix with another home's replica, newer than this one's. The restore refuses it
// by the identity every segment carries rather than bring back the wrong home's state.
func TestRestore_AnotherHomesReplica(t *testing.T) {
	_, _, c := bucket(t)
	replicated(t, c, identity, testKey)
	// The other home's generation, newer, as a serve of it that began at the same moment as
	// this home's leaves it (a serve does not begin one after another home's: owner_test.go).
	_, _, elsewhere := bucket(t)
	replicated(t, elsewhere, "agora-home-other+99999999+AQID", replicate.SegmentKey([]byte("another home's secret key, 32 b.")))
	gens, err := elsewhere.List(t.Context(), "replica/agora/")
	if err != nil || len(gens) == 0 {
		t.Fatalf("the other home's generation: %v, %v", gens, err)
	}
	copyGeneration(t, elsewhere, c, strings.Split(strings.TrimPrefix(gens[0], "replica/agora/"), "/")[0])
	err = restoreFails(t, c, identity, "another home's replica", "agora-home-other")
	if errors.Is(err, replicate.ErrNoReplica) {
		t.Errorf("reported as missing: %v", err)
	}
	// A bucket writer who copies the other home's segments under this home's identity cannot
	// make them authenticate: FuzzDecodeSegment's seeds and TestDecodeSegment_ForgedKey.
}

// TestReplicate_CredentialsNeverInErrorsOrLogs: attack: wrong credentials, and a bucket that
// does not exist, put no secret into a restore's error or the replicator's log lines.
func TestReplicate_CredentialsNeverInErrorsOrLogs(t *testing.T) {
	srv, cfg, _ := bucket(t)
	// The loop logs exactly the error Sync returns (and Start returns the first Sync's), so
	// these two errors are what any log line would carry.
	creds := s3.Credentials{AccessKeyID: "AKIAREPLICATELEAK1", SecretAccessKey: "replicate-secret-must-not-leak-0123456789"}
	bad, err := s3.New(cfg, creds, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.CloseIdleConnections()
	_, rerr := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: bad, DB: "agora", Identity: identity, Key: testKey, Path: filepath.Join(t.TempDir(), "agora.db")})
	if rerr == nil {
		t.Fatal("a restore with wrong credentials succeeded")
	}
	path := filepath.Join(t.TempDir(), "agora.db")
	openDB(t, path)
	_, serr := replicate.Start(t.Context(), replicate.Options{Client: bad, DB: "agora", Path: path, Identity: identity, Key: testKey})
	if serr == nil {
		t.Fatal("a replicator with wrong credentials started")
	}
	for _, s := range []string{rerr.Error(), serr.Error()} {
		for _, secret := range []string{creds.AccessKeyID, creds.SecretAccessKey, srv.Creds.SecretAccessKey} {
			if strings.Contains(s, secret) {
				t.Errorf("a secret in %q", s)
			}
		}
	}
}
