package remote

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// fillGateway is a gateway (TLS, the session and mounts routes) serving a bundle directory,
// its manifest file nested in it, and a writable workspace; files maps a mount name to the
// directory packed for it.
func fillGateway(t *testing.T, mounts []remote.Mount, files map[string]string) (url string, ca []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer agw_fill" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		name := filepath.Base(r.URL.Path)
		if dir, ok := files[name]; ok && strings.Contains(r.URL.Path, "/mounts/") {
			if err := Pack(w, dir); err != nil {
				t.Error(err)
			}
			return
		}
		json.NewEncoder(w).Encode(remote.Info{Dispatch: "01FILL", Version: Version(), Mounts: mounts})
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// fillerEnv sets the filler's environment and returns the stage and its socket.
func fillerEnv(t *testing.T, url string, ca []byte, places []remote.SlotPlace) (stage, sock string) {
	t.Helper()
	stage = t.TempDir()
	sock = filepath.Join(t.TempDir(), "fill.sock")
	enc, _ := json.Marshal(places)
	t.Setenv(remote.StageEnv, stage)
	t.Setenv(remote.SlotFillEnv, sock)
	t.Setenv(remote.GatewayURLEnv, url)
	t.Setenv(remote.CAEnv, string(ca))
	t.Setenv(remote.SlotPlacesEnv, string(enc))
	for i := range places {
		if err := os.Mkdir(filepath.Join(stage, "p-"+string(rune('0'+i))), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := premakePlaces(stage, places); err != nil {
		t.Fatal(err)
	}
	return stage, sock
}

// The slot's filler fills its places at the claim: the init step made the file place's entry
// and the mount point of the place nested in the bundle; the worker hands over its grant on
// the filler's socket; the filler fetches the bundle around that mount point (left as made: the
// worker's container has the manifest's own mount there) and writes the manifest into the
// entry in place (the worker's subPath mount is of that inode). The attack: anything that
// connects after the worker (the agent) finds no filler; and a grant for a dispatch whose
// read-only mounts are not the slot's places is refused, nothing filled.
func TestFill_PlacesFilledInPlace(t *testing.T) {
	bundle, manifest := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"subagent.json": "{}", "manifest.json": "placeholder", "capabilities/a.json": "cap"} {
		os.MkdirAll(filepath.Dir(filepath.Join(bundle, name)), 0o755)
		if err := os.WriteFile(filepath.Join(bundle, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(manifest, remote.FileName), []byte(`{"real":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := []remote.Mount{
		{Name: "bundle", Dst: "/agora/bundle", Fetch: true},
		{Name: "bundle-manifest-json", Dst: "/agora/bundle/manifest.json", File: true, Fetch: true},
		{Name: "workspace", Dst: "/agora/workspace", Writable: true, Fetch: true},
	}
	url, ca := fillGateway(t, mounts, map[string]string{"bundle": bundle, "bundle-manifest-json": manifest})
	places := []remote.SlotPlace{{Dst: "/agora/bundle"}, {Dst: "/agora/bundle/manifest.json", File: true}}
	stage, sock := fillerEnv(t, url, ca, places)
	entry := filepath.Join(stage, "p-1", remote.FileName)
	before, err := os.Stat(entry)
	if err != nil {
		t.Fatalf("the init step made no entry for the file place: %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- fillMain(t.Context(), os.Stderr) }()
	c, err := NewClient(url, "01FILL", "agw_fill", ca)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	filled, err := handOver(t.Context(), sock, c)
	if err != nil {
		t.Fatalf("hand over: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the filler: %v", err)
	}
	if !filled["bundle"] || !filled["bundle-manifest-json"] || filled["workspace"] || len(filled) != 2 {
		t.Errorf("filled %v, want the bundle and its manifest", filled)
	}
	if b, err := os.ReadFile(filepath.Join(stage, "p-0", "capabilities", "a.json")); err != nil || string(b) != "cap" {
		t.Errorf("the bundle's place: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(stage, "p-0", "manifest.json")); len(b) != 0 {
		t.Errorf("the nested place's mount point was overwritten with %q", b)
	}
	after, err := os.Stat(entry)
	if b, _ := os.ReadFile(entry); err != nil || string(b) != `{"real":true}` || !os.SameFile(before, after) {
		t.Errorf("the file place: %q (same inode %v), want the manifest written in place", b, err == nil && os.SameFile(before, after))
	}
	if _, err := os.Stat(filepath.Join(stage, "p-0", fillTmp)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the fill's temporary directory is left in the place: %v", err)
	}
	// The agent, after the worker: no one listens, the socket is gone.
	if conn, err := net.Dial("unix", sock); err == nil {
		conn.Close()
		t.Error("something still listens on the filler's socket after its one hand-over")
	}

	// A dispatch with a read-only mount the slot has no place for.
	stage2, sock2 := fillerEnv(t, url, ca, places[:1])
	go func() { done <- fillMain(t.Context(), os.Stderr) }()
	if _, err := handOver(t.Context(), sock2, c); err == nil || !strings.Contains(err.Error(), "no place") {
		t.Errorf("hand over for a dispatch the places do not fit: %v, want refused", err)
	}
	if err := <-done; err == nil {
		t.Error("the filler filled a dispatch its places do not fit")
	}
	if ents, _ := os.ReadDir(filepath.Join(stage2, "p-0")); len(ents) != 0 {
		t.Errorf("a refused fill left %d entries in the place", len(ents))
	}
}

// The worker's side of a slot with places: every read-only mount must have been filled, and
// nothing writable; a filled mount is not fetched again.
func TestFetchInto_PlacesMustBeFilled(t *testing.T) {
	mounts := []remote.Mount{
		{Name: "bundle", Dst: "/agora/bundle", Fetch: true},
		{Name: "out", Dst: "/agora/out", Writable: true, Result: true},
	}
	url, ca := fillGateway(t, mounts, nil)
	c, err := NewClient(url, "01FILL", "agw_fill", ca)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := t.TempDir()
	if err := FetchInto(t.Context(), c, root, map[string]bool{}, true); err == nil {
		t.Error("a read-only mount the filler did not fill was taken")
	}
	if err := FetchInto(t.Context(), c, t.TempDir(), map[string]bool{"bundle": true, "out": true}, true); err == nil {
		t.Error("a writable mount counted filled was taken")
	}
	root = t.TempDir()
	if err := FetchInto(t.Context(), c, root, map[string]bool{"bundle": true}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bundle")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worker made the filled place itself: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(root, "out")); err != nil || !fi.IsDir() {
		t.Errorf("the out directory: %v", err)
	}
}

// premakePlaces refuses to follow a planted link: an entry is made O_EXCL|O_NOFOLLOW.
func TestPremakePlaces_NoFollow(t *testing.T) {
	stage := t.TempDir()
	os.Mkdir(filepath.Join(stage, "p-0"), 0o755)
	elsewhere := filepath.Join(t.TempDir(), "target")
	if err := os.Symlink(elsewhere, filepath.Join(stage, "p-0", remote.FileName)); err != nil {
		t.Fatal(err)
	}
	err := premakePlaces(stage, []remote.SlotPlace{{Dst: "/etc/ssl/certs/ca-certificates.crt", File: true}})
	if err == nil || !errors.Is(err, syscall.EEXIST) {
		t.Errorf("premake over a planted link: %v, want EEXIST", err)
	}
	if _, err := os.Lstat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("premake followed the link: %v", err)
	}
}

func FuzzParseFillAnswer(f *testing.F) {
	f.Add([]byte(`{"filled":["bundle"]}` + "\n"))
	f.Add([]byte(`{"filled":[],"error":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseFillAnswer(b)
		if err != nil {
			return
		}
		if len(got) > remote.MaxSlotPlaces {
			t.Fatalf("%d names", len(got))
		}
		for n := range got {
			if !remote.ValidMountName(n) {
				t.Fatalf("name %q", n)
			}
		}
	})
}
