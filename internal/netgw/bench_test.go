package netgw

import (
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/store"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// modelReply stands in for a model's answer: about 1 KiB of JSON.
var modelReply = []byte(`{"id":"x","choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("a", 900) + `"}}]}`)

// modelSocket serves a fixed model reply on a Unix socket in dir, as the dispatch's model
// gateway does.
func modelSocket(b *testing.B, dir string) string {
	path := filepath.Join(dir, wire.GatewaySocket)
	ln, err := listenUnix(path)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(modelReply)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return path
}

func unixClient(path string, keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: !keepAlive,
		IdleConnTimeout:   2 * time.Second, // the worker's gateway client's
	}}
}

// BenchmarkModelCall measures one model call (a 1 KiB request and reply) through the
// network gateway's tunnel against the host's Unix socket directly; median-ms is the target
// metric (overhead <= 2 ms). "tunnel" reuses connections as the worker's gateway client does;
// "tunnel-new" opens a tunnel (TLS handshake and upgrade) per call.
func BenchmarkModelCall(b *testing.B) {
	g := startGateway(b)
	hostDir := b.TempDir()
	direct := modelSocket(b, hostDir)
	id := "01BENCHMODELCALL"
	s, err := g.reg.Export(b.Context(), compute.Spec{ID: id, Binds: []compute.Bind{{Src: hostDir, Dst: wire.GatewayPath}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	root := b.TempDir()
	if err := os.Mkdir(filepath.Join(root, wire.GatewayDir), 0o700); err != nil {
		b.Fatal(err)
	}
	b.Setenv(remote.GatewayURLEnv, g.url)
	b.Setenv(remote.TokenEnv, s.Token)
	b.Setenv(remote.CAEnv, string(g.ca))
	b.Setenv(workerremote.DispatchEnv, id)
	w, err := workerremote.Start(b.Context(), root, io.Discard, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Finish(context.Background())
	tunnelled := filepath.Join(root, wire.GatewayDir, wire.GatewaySocket)
	body := bytes.Repeat([]byte("q"), 1024)
	for _, bc := range []struct {
		name      string
		path      string
		keepAlive bool
	}{
		{"direct", direct, true},
		{"tunnel", tunnelled, true},
		{"direct-new", direct, false},
		{"tunnel-new", tunnelled, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := unixClient(bc.path, bc.keepAlive)
			defer c.CloseIdleConnections()
			times := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				resp, err := c.Post("http://gateway/model/chat", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(len(modelReply)) {
					b.Fatalf("reply of %d bytes", n)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
		})
	}
}

// BenchmarkDownload measures fetching a 100 MB bundle over loopback TLS (target >= 200 MB/s):
// "stream" reads the tar to io.Discard, "fetch" extracts it into a stage as the init step does.
func BenchmarkDownload(b *testing.B) {
	const size = 100 << 20
	g := startGateway(b)
	bundle := b.TempDir()
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(bundle, "capability.tar"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	id := "01BENCHDOWNLOAD"
	s, err := g.reg.Export(b.Context(), compute.Spec{ID: id, Binds: []compute.Bind{{Src: bundle, Dst: wire.BundlePath}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := g.client(b, id, s.Token)
	b.Run("stream", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			code, n := g.stream(b, remote.RoutePrefix+id+"/mounts/bundle", s.Token)
			if code != 200 || n < size {
				b.Fatalf("GET: %d, %d bytes", code, n)
			}
		}
	})
	b.Run("fetch", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "bundle")
			if err := c.Fetch(b.Context(), s.Mounts[0], dir); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(dir)
		}
	})
}

// stream GETs path and counts the body's bytes.
func (g *gw) stream(b *testing.B, path, token string) (int, int64) {
	req, _ := http.NewRequest("GET", g.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := g.httpClient().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, n
}

// BenchmarkUpload measures a worker's upload of a 100 MB out directory over loopback TLS, as
// `agora worker` sends it (Pack into the PUT), into a fresh session each time (a mount takes
// one upload): what the gateway extracts, hashes and marks. "disk" is a
// single serve's gateway; "kept" a replicating serve's (ADR 0009), which also keeps the bytes
// in a blob store (here a local one: no bucket's latency, no replica's wait) and agora.db.
func BenchmarkUpload(b *testing.B) {
	const size = 100 << 20
	out := b.TempDir()
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(out, "output.bin"), data, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "disk", true: "kept"}[kept], func(b *testing.B) {
			g := startGateway(b)
			if kept {
				db, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "agora.db"), append(append([]store.Migration{}, SessionMigrations...), UploadMigrations...))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				bucket, err := blob.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				g.reg.Sessions = &DBSessions{DB: db}
				g.reg.Uploads = &DBUploads{DB: db, Blobs: bucket}
			}
			b.SetBytes(size)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				id := "01BENCHUPLOAD" + strings.Repeat("X", i%10) + strconv.Itoa(i)
				dst := b.TempDir()
				s, err := g.reg.Export(b.Context(), compute.Spec{ID: id, Binds: []compute.Bind{{Src: dst, Dst: wire.OutPath, Writable: true, Result: true}}})
				if err != nil {
					b.Fatal(err)
				}
				c := g.client(b, id, s.Token)
				if err := c.Upload(b.Context(), s.Mounts[0], out); err != nil {
					b.Fatal(err)
				}
				s.Close()
				os.RemoveAll(dst)
			}
		})
	}
}
