package remote

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// A proxy dispatch's system trust store is a file
// place of the slot, filled by the filler with the claiming dispatch's trust file. The attack:
// make that fill fail or come out short and see what trust store the worker is left with. It
// must never be a half-written CA, a symlink to the image's store, or what was in the place
// before (the template's, an earlier dispatch's, a planted one); and a failed fill must fail
// the hand-over, so the worker never starts the agent. (A tar cut cleanly at an entry boundary,
// after the file's bytes but before the end marker, reads as whole: archive/tar takes a clean
// EOF there for the end. The file is then whole, and the gateway's abort of a failed download
// is an HTTP error the client sees, not a clean EOF.)

const redTeam35TrustDst = "/etc/ssl/certs/ca-certificates.crt"

// redTeam35TrustGateway serves the dispatch's trust directory and trust file; trust is the raw
// tar body served for the trust file.
func redTeam35TrustGateway(t *testing.T, trustDir string, trust []byte) (url string, ca []byte) {
	t.Helper()
	mounts := []remote.Mount{
		{Name: "trust", Dst: "/agora/trust", Fetch: true},
		{Name: "system-trust", Dst: redTeam35TrustDst, File: true, Fetch: true},
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer agw_fill" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/mounts/trust"):
			if err := Pack(w, trustDir); err != nil {
				t.Error(err)
			}
		case strings.HasSuffix(r.URL.Path, "/mounts/system-trust"):
			w.Write(trust)
		default:
			json.NewEncoder(w).Encode(remote.Info{Dispatch: "01FILL", Version: Version(), Mounts: mounts})
		}
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func redTeam35TrustTar(t *testing.T, hdr *tar.Header, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRedTeam35Trust_FailedOrShortTrustFillNeverLeavesAnotherStore(t *testing.T) {
	const caPEM = "-----BEGIN CERTIFICATE-----\nthe dispatch's proxy CA\n-----END CERTIFICATE-----\n"
	const planted = "the template's, an earlier dispatch's or a planted trust store, longer than the dispatch's own CA by a good margin\n"
	whole := redTeam35TrustTar(t, &tar.Header{Name: remote.FileName, Mode: 0o644, Size: int64(len(caPEM)), Typeflag: tar.TypeReg}, caPEM)
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"whole", whole, true},
		{"cut in the file's bytes", whole[:512+len(caPEM)/2], false},
		{"empty answer", nil, false},
		{"a symlink to the image's store", redTeam35TrustTar(t, &tar.Header{Name: remote.FileName, Linkname: "/etc/ssl/certs/ca-certificates.crt", Typeflag: tar.TypeSymlink}, ""), false},
		{"a directory", redTeam35TrustTar(t, &tar.Header{Name: remote.FileName, Mode: 0o755, Typeflag: tar.TypeDir}, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trustDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(trustDir, "ca-certificates.crt"), []byte(caPEM), 0o644); err != nil {
				t.Fatal(err)
			}
			url, ca := redTeam35TrustGateway(t, trustDir, tc.body)
			places := []remote.SlotPlace{{Dst: "/agora/trust"}, {Dst: redTeam35TrustDst, File: true}}
			stage, sock := fillerEnv(t, url, ca, places)
			entry := filepath.Join(stage, "p-1", remote.FileName)
			// What was in the place before the claim: the fill must replace all of it or fail.
			if err := os.WriteFile(entry, []byte(planted), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- fillMain(t.Context(), os.Stderr) }()
			c, err := NewClient(url, "01FILL", "agw_fill", ca)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			filled, herr := handOver(t.Context(), sock, c)
			ferr := <-done
			fi, lerr := os.Lstat(entry)
			if lerr != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the trust store's place is no longer the init step's regular file: %v %v", fi, lerr)
			}
			got, _ := os.ReadFile(entry)
			if tc.ok {
				if herr != nil || ferr != nil || !filled["system-trust"] {
					t.Fatalf("a whole trust file: hand over %v, filler %v, filled %v", herr, ferr, filled)
				}
				if string(got) != caPEM {
					t.Errorf("the trust store after the fill is %q, want exactly the dispatch's CA", got)
				}
				return
			}
			if herr == nil || ferr == nil {
				t.Fatalf("a %s trust file: hand over %v, filler %v; want both failed so the worker never starts the agent", tc.name, herr, ferr)
			}
			if len(filled) != 0 {
				t.Errorf("a failed fill reports %v filled", filled)
			}
			if string(got) == caPEM {
				return // the CA landed whole before the failure was seen: still the dispatch's own
			}
			if strings.Contains(string(got), "the dispatch's proxy CA") && string(got) != caPEM {
				t.Errorf("a failed fill left half the dispatch's CA in the trust store: %q", got)
			}
		})
	}
}

// The filler checks the places against the dispatch again, whatever the host checked: a proxy
// dispatch in a plain slot (no trust store place: the image's store would stay) and a plain
// dispatch in a proxy slot (its trust store place would stay empty, or hold what was there)
// are both refused before anything is fetched, and the hand-over fails.
func TestRedTeam35Trust_FillerRefusesATrustStoreMismatch(t *testing.T) {
	trustDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(trustDir, "ca-certificates.crt"), []byte("CA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tarCA := redTeam35TrustTar(t, &tar.Header{Name: remote.FileName, Mode: 0o644, Size: 3, Typeflag: tar.TypeReg}, "CA\n")
	url, ca := redTeam35TrustGateway(t, trustDir, tarCA)
	for _, tc := range []struct {
		name   string
		places []remote.SlotPlace
		want   string
	}{
		{"proxy dispatch, plain slot", []remote.SlotPlace{{Dst: "/agora/trust"}}, "no place at " + redTeam35TrustDst},
		{"proxy dispatch, slot with the store as a directory", []remote.SlotPlace{{Dst: "/agora/trust"}, {Dst: redTeam35TrustDst}}, "is a file in the dispatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage, sock := fillerEnv(t, url, ca, tc.places)
			done := make(chan error, 1)
			go func() { done <- fillMain(t.Context(), os.Stderr) }()
			c, err := NewClient(url, "01FILL", "agw_fill", ca)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := handOver(t.Context(), sock, c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("hand over: %v, want refused (%q)", err, tc.want)
			}
			if err := <-done; err == nil {
				t.Error("the filler filled a dispatch whose trust store is not its places")
			}
			if ents, _ := os.ReadDir(filepath.Join(stage, "p-0")); len(ents) != 0 {
				t.Errorf("a refused fill left %d entries in the trust directory's place", len(ents))
			}
		})
	}
}

// The gateway aborts a download that fails midway (netgw download.go: panic with
// http.ErrAbortHandler after the status went out). A tar cut cleanly at an entry boundary reads
// as whole to archive/tar, so what stops a partial place (a directory with some entries, a trust
// directory without its file) is the client seeing the abort as an error, not a clean end: on
// HTTP/1.1 and HTTP/2 alike, the first answer (aborted after its first entry) is not taken, and
// the fetch starts again and gets the whole mount.
func TestRedTeam35Trust_AbortedDownloadAtAnEntryBoundaryNotTaken(t *testing.T) {
	var first, whole bytes.Buffer
	for _, b := range []*bytes.Buffer{&first, &whole} {
		tw := tar.NewWriter(b)
		tw.WriteHeader(&tar.Header{Name: "a.pem", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
		tw.Write([]byte("a\n"))
		if b == &first {
			tw.Flush() // no Close: no end marker, the second entry never comes
			continue
		}
		tw.WriteHeader(&tar.Header{Name: "ca-certificates.crt", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
		tw.Write([]byte("CA\n"))
		tw.Close()
	}
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "http2"}[h2], func(t *testing.T) {
			var mu sync.Mutex
			gets := 0
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.Contains(r.URL.Path, "/mounts/") {
					json.NewEncoder(w).Encode(remote.Info{Dispatch: "01FILL", Version: Version()})
					return
				}
				mu.Lock()
				gets++
				n := gets
				mu.Unlock()
				w.Header().Set("Content-Type", "application/x-tar")
				if n > 1 {
					w.Write(whole.Bytes())
					return
				}
				w.Write(first.Bytes())
				http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			c, err := NewClient(srv.URL, "01FILL", "agw_fill", ca)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			dir := filepath.Join(t.TempDir(), "trust")
			if err := c.Fetch(t.Context(), remote.Mount{Name: "trust", Dst: "/agora/trust", Fetch: true}, dir); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "ca-certificates.crt")); err != nil || string(b) != "CA\n" {
				t.Errorf("after an aborted first answer the mount has %q, %v (GETs %d): the cut answer was taken as whole", b, err, gets)
			}
		})
	}
}
