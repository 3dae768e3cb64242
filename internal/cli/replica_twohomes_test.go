package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
)

// TestReplica_TwoHomesOnOnePrefix: one agora.yaml copied to two hosts gives two homes
// the same replicate.s3 bucket and prefix, keep_generations 1. Home A's two generations are
// older than home B's two. B's `agora gc` removes only B's older generation and warns, naming
// the prefix and what A's generations claim; A's generations are all still there. `agora
// doctor` fails A's replica bucket row (the newest generation is B's), naming both homes, and
// passes B's.
func TestReplica_TwoHomesOnOnePrefix(t *testing.T) {
	srv := s3test.Shared(t)
	b := srv.Bucket(t, false)
	shared := srv.Client(t, b)
	elsewhere := srv.Client(t, srv.Bucket(t, false))
	creds := filepath.Join(t.TempDir(), "s3.env")
	writeFiles(t, map[string]string{creds: "AWS_ACCESS_KEY_ID=" + srv.Creds.AccessKeyID + "\nAWS_SECRET_ACCESS_KEY=" + srv.Creds.SecretAccessKey + "\n"})
	os.Chmod(creds, 0o600)
	yaml := fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\nreplicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n  keep_generations: 1\n",
		b.Endpoint, b.Bucket, b.Prefix, creds)
	envA, envB := auditHome(t, yaml), auditHome(t, yaml)
	idA, genA := replicaHome(t, envA["AGORA_HOME"])
	idB, genB := replicaHome(t, envB["AGORA_HOME"])
	a1, a2 := genA(elsewhere), genA(elsewhere) // A's, before B began (copied in below)
	b1, b2 := genB(shared), genB(shared)
	for _, g := range []string{a1, a2} {
		names, err := elsewhere.List(t.Context(), "replica/agora/"+g+"/")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			data, _, err := elsewhere.Get(t.Context(), n, "", 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := shared.Put(t.Context(), n, data, false, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	segments := func(g string) int {
		names, err := shared.List(t.Context(), "replica/agora/"+g+"/")
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}

	r := runAgora(t, envB, "gc")
	if r.code != 0 || !strings.Contains(r.stderr, "purged replica generation agora/"+b1) {
		t.Fatalf("B's gc: %+v", r)
	}
	for _, g := range []string{a1, a2} {
		if !strings.Contains(r.stderr, "warning: gc: left a replica generation") || !strings.Contains(r.stderr, g) {
			t.Errorf("B's gc does not warn of A's generation %s:\n%s", g, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, idA) {
		t.Errorf("B's gc warning does not name what A's generations claim (%s):\n%s", idA, r.stderr)
	}
	if segments(a1) == 0 || segments(a2) == 0 || segments(b1) != 0 || segments(b2) == 0 {
		t.Errorf("after B's gc: segments a1 %d a2 %d b1 %d b2 %d; want only b1 gone", segments(a1), segments(a2), segments(b1), segments(b2))
	}
	// The decision to leave A's generations is B's audit's too, once each: a second gc leaves
	// them again and records nothing more.
	runAgora(t, envB, "gc")
	left := runAgora(t, envB, "audit", "log", "--kind", "retention.replica_left", "--output", "json").stdout
	for _, g := range []string{a1, a2} {
		if n := strings.Count(left, `"subject": "replica/agora/`+g+`"`); n != 1 {
			t.Errorf("%d retention.replica_left entries for A's generation %s after two gcs, want 1:\n%s", n, g, left)
		}
	}
	if strings.Contains(left, b1) || strings.Contains(left, b2) {
		t.Errorf("B's own generations recorded as left:\n%s", left)
	}

	row := func(env map[string]string) string {
		t.Helper()
		r := runAgora(t, env, "doctor")
		for _, line := range strings.Split(r.stdout, "\n") {
			if name, rest, ok := strings.Cut(line, "\t"); ok && name == "replica bucket" {
				return rest
			}
		}
		t.Fatalf("doctor has no replica bucket row:\n%s", r.stdout)
		return ""
	}
	if got := row(envA); strings.HasPrefix(got, "ok") || !strings.Contains(got, b2) || !strings.Contains(got, idB) || !strings.Contains(got, idA) ||
		!strings.Contains(got, "own replicate.s3 prefix") {
		t.Errorf("A's doctor row with B's generation newest: %q", got)
	}
	if got := row(envB); !strings.HasPrefix(got, "ok") {
		t.Errorf("B's doctor row: %q", got)
	}
}

// replicaHome returns the identity of the home at dir and a func that begins and closes one
// generation of its agora.db in a bucket, as a serve start does.
func replicaHome(t *testing.T, dir string) (string, func(*s3.Client) string) {
	t.Helper()
	pub, err := os.ReadFile(filepath.Join(dir, home.AuditPubFile))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(filepath.Join(dir, home.SecretKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(pub))
	return id, func(c *s3.Client) string {
		t.Helper()
		r, err := replicate.Start(t.Context(), replicate.Options{Client: c, DB: "agora", Path: filepath.Join(dir, "agora.db"),
			Identity: id, Key: replicate.SegmentKey(secret), Lag: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		return r.Status().Generation
	}
}
