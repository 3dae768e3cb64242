package s3_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/s3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.StopShared()
	os.Exit(code)
}

func TestClient_RoundTrip(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(t, srv.Bucket(t, false))
	ctx := t.Context()
	if _, err := c.Put(ctx, "blobs/a", []byte("hello"), false, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Get(ctx, "blobs/a", "", 1<<20)
	if err != nil || string(got) != "hello" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, _, err := c.Get(ctx, "blobs/a", "", 3); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a 5-byte object read with a 3-byte limit: %v", err)
	}
	if _, _, err := c.Get(ctx, "blobs/missing", "", 10); !errors.Is(err, s3.ErrNotFound) {
		t.Errorf("missing object: got %v, want ErrNotFound", err)
	}
	if _, err := c.Head(ctx, "blobs/missing"); !errors.Is(err, s3.ErrNotFound) {
		t.Errorf("head of a missing object: got %v, want ErrNotFound", err)
	}
	names, err := c.List(ctx, "blobs/")
	if err != nil || len(names) != 1 || names[0] != "blobs/a" {
		t.Errorf("list: got %q, %v", names, err)
	}
	// The prefix is real: the object sits under agora/ in the backend's directory.
	if _, err := os.Stat(srv.Dir + "/" + c.Bucket() + "/agora/blobs/a"); err != nil {
		t.Errorf("object not under the prefix on the server: %v", err)
	}
}

// TestClient_ObjectLock: inside COMPLIANCE retention the server refuses deleting the locked
// version and shortening nothing is possible; a conditional write refuses an overwrite.
func TestClient_ObjectLock(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(t, srv.Bucket(t, true))
	ctx := t.Context()
	until := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	info, err := c.Put(ctx, "anchors/x", []byte("cp1"), true, &s3.Lock{Mode: "COMPLIANCE", RetainUntil: until})
	if err != nil {
		t.Fatal(err)
	}
	if info.VersionID == "" {
		t.Fatal("a put into an Object Lock bucket returned no version id")
	}
	l, err := c.Retention(ctx, "anchors/x", info.VersionID)
	if err != nil || l.Mode != "COMPLIANCE" || !l.RetainUntil.Equal(until) {
		t.Errorf("retention: got %+v, %v; want COMPLIANCE until %s", l, err, until)
	}
	if _, err := c.Put(ctx, "anchors/x", []byte("forged"), true, nil); !errors.Is(err, s3.ErrExists) {
		t.Errorf("conditional overwrite: got %v, want ErrExists", err)
	}
	if err := c.Delete(ctx, "anchors/x", info.VersionID); !errors.Is(err, s3.ErrLocked) {
		t.Errorf("delete of the locked version: got %v, want ErrLocked", err)
	}
	got, _, err := c.Get(ctx, "anchors/x", info.VersionID, 100)
	if err != nil || string(got) != "cp1" {
		t.Errorf("the locked version after the attempts: %q, %v", got, err)
	}
}

// TestClient_Errors: each failure says what is wrong for the user, and no error carries the
// secret key or the access key id (attack: credentials leaking into an error).
func TestClient_Errors(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, false)
	ctx := t.Context()
	noSecret := func(t *testing.T, err error) {
		t.Helper()
		if strings.Contains(err.Error(), srv.Creds.SecretAccessKey) || strings.Contains(err.Error(), srv.Creds.AccessKeyID) {
			t.Errorf("error leaks a credential: %v", err)
		}
	}
	missing := cfg
	missing.Bucket = "no-such-bucket"
	err := srv.Client(t, missing).CheckBucket(ctx)
	if !errors.Is(err, s3.ErrBucketMissing) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing bucket: got %v", err)
	} else {
		noSecret(t, err)
	}
	bad := srv.Creds
	bad.SecretAccessKey = "wrong-" + bad.SecretAccessKey
	c, err := s3.New(cfg, bad, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Put(ctx, "x", []byte("y"), false, nil)
	if !errors.Is(err, s3.ErrAuth) || !strings.Contains(err.Error(), "refused agora's credentials") {
		t.Errorf("wrong secret: got %v", err)
	} else {
		noSecret(t, err)
		if strings.Contains(err.Error(), bad.SecretAccessKey) {
			t.Errorf("error leaks the wrong secret: %v", err)
		}
	}
	down := cfg
	down.Endpoint = "http://127.0.0.1:1"
	err = srv.Client(t, down).CheckBucket(ctx)
	if !errors.Is(err, s3.ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("endpoint down: got %v", err)
	}
	// The egress policy holds: without loopback allowed, the client does not dial it.
	c, _ = s3.New(cfg, srv.Creds, egress.Policy{})
	if err := c.CheckBucket(ctx); !errors.Is(err, s3.ErrUnreachable) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("loopback endpoint without the egress allowance: got %v", err)
	}
}

// TestClient_PrefixEscape: crafted names and prefixes cannot leave the configured prefix.
func TestClient_PrefixEscape(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, false)
	c := srv.Client(t, cfg)
	for _, name := range []string{"../other/x", "a/../../x", "/abs", "a//b", "a/./b", "a%2f..", "a b", "a\\b", "a?b", "a#b", ""} {
		if _, err := c.Put(t.Context(), name, []byte("x"), false, nil); err == nil || !strings.Contains(err.Error(), "object name") {
			t.Errorf("name %q: got %v, want a refusal of the name", name, err)
		}
	}
	for _, p := range []string{"../", "a/../..", "/a", "a//", "a b/"} {
		bad := cfg
		bad.Prefix = p
		if _, err := s3.New(bad, srv.Creds, s3test.Policy()); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	for _, e := range []string{"http://user:pw@127.0.0.1:1", "ftp://h", "http://h/path", "http://h?q=1"} {
		bad := cfg
		bad.Endpoint = e
		_, err := s3.New(bad, srv.Creds, s3test.Policy())
		if err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("endpoint %q: got %v", e, err)
		}
	}
}

func TestParseCredentials(t *testing.T) {
	good := "# team bucket\nAWS_ACCESS_KEY_ID=AKIDEXAMPLE\nAWS_SECRET_ACCESS_KEY=s3cr3t/value+x\n"
	c, err := s3.ParseCredentials([]byte(good))
	if err != nil || c.AccessKeyID != "AKIDEXAMPLE" || c.SecretAccessKey != "s3cr3t/value+x" {
		t.Fatalf("got %v", err)
	}
	if s := c.String(); strings.Contains(s, "s3cr3t") {
		t.Errorf("String leaks: %s", s)
	}
	for _, bad := range []string{
		"AWS_ACCESS_KEY_ID=a\n",
		"AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\nAWS_SECRET_ACCESS_KEY=c\n",
		"AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\nREGION=x\n",
		"AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=hunter 2\n",
		"just-a-secret-line\n",
	} {
		_, err := s3.ParseCredentials([]byte(bad))
		if err == nil {
			t.Errorf("accepted %q", bad)
		} else if strings.Contains(err.Error(), "hunter") || strings.Contains(err.Error(), "just-a-secret") {
			t.Errorf("error echoes the value: %v", err)
		}
	}
}

func TestParseRetentionAndList(t *testing.T) {
	l, err := s3.ParseRetention([]byte(`<?xml version="1.0" encoding="UTF-8"?><Retention xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Mode>COMPLIANCE</Mode><RetainUntilDate>2027-11-24T12:00:00Z</RetainUntilDate></Retention>`))
	if err != nil || l.Mode != "COMPLIANCE" || l.RetainUntil.Year() != 2027 {
		t.Errorf("got %+v, %v", l, err)
	}
	for _, bad := range []string{
		`<Retention><Mode>NONE</Mode><RetainUntilDate>2027-11-24T12:00:00Z</RetainUntilDate></Retention>`,
		`<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>tomorrow</RetainUntilDate></Retention>`,
		`<!DOCTYPE x [<!ENTITY a "COMPLIANCE">]><Retention><Mode>&a;</Mode></Retention>`,
		`<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>2027-11-24T12:00:00Z</RetainUntilDate></Retention><Retention/>`,
		`<Other/>`,
	} {
		if _, err := s3.ParseRetention([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	p, err := s3.ParseList([]byte(`<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken><Contents><Key>p/a</Key></Contents><Contents><Key>p/b</Key></Contents></ListBucketResult>`))
	if err != nil || !p.Truncated || p.Next != "t2" || len(p.Keys) != 2 {
		t.Errorf("got %+v, %v", p, err)
	}
	many := bytes.Repeat([]byte(`<Contents><Key>k</Key></Contents>`), 1001)
	if _, err := s3.ParseList(append(append([]byte(`<ListBucketResult>`), many...), `</ListBucketResult>`...)); err == nil {
		t.Error("a page of 1,001 keys was accepted")
	}
}
