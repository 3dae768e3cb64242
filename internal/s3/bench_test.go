package s3_test

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/s3"
)

// BenchmarkBlob puts and gets blobs through the local store and through S3 (a versitygw on
// loopback, posix backend on the same disk) in the same run. Each put is of new bytes
// (a fresh blob, as a dispatch's patch or log is); each get re-verifies the hash.
func BenchmarkBlob(b *testing.B) {
	srv := s3test.Shared(b)
	stores := map[string]*blob.Store{}
	local, err := blob.Open(filepath.Join(b.TempDir(), "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	stores["local"] = local
	stores["s3"] = blob.OpenRemote(s3.Blobs{C: srv.Client(b, srv.Bucket(b, false))})
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, name := range []string{"local", "s3"} {
			st := stores[name]
			b.Run(fmt.Sprintf("put/%s/%dKiB", name, size>>10), func(b *testing.B) {
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				for b.Loop() {
					rand.Read(buf[:16])
					if _, err := st.Put(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("get/%s/%dKiB", name, size>>10), func(b *testing.B) {
				buf := make([]byte, size)
				rand.Read(buf)
				d, err := st.Put(buf)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := st.Get(d, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
