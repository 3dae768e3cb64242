package redact

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkRedact masks 50 secrets in 4 MiB of log-like output in which each secret appears a few
// times, raw and base64-encoded.
func BenchmarkRedact(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	secrets := make([][]byte, 50)
	for i := range secrets {
		s := make([]byte, 24+rng.IntN(24))
		for j := range s {
			s[j] = alnum[rng.IntN(len(alnum))]
		}
		secrets[i] = s
	}
	var in bytes.Buffer
	for in.Len() < 4<<20 {
		switch rng.IntN(400) {
		case 0:
			in.Write(secrets[rng.IntN(len(secrets))])
		case 1:
			in.WriteString(base64.StdEncoding.EncodeToString(secrets[rng.IntN(len(secrets))]))
		default:
			fmt.Fprintf(&in, `{"level":"info","msg":"step done","step":%d,"took_ms":%d}`, rng.IntN(1000), rng.IntN(5000))
		}
		in.WriteByte('\n')
	}
	data := in.Bytes()[:4<<20]
	r := New(secrets)
	if bytes.Equal(r.Bytes(data), data) {
		b.Fatal("benchmark input has nothing to redact")
	}
	b.Run("Bytes", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r.Bytes(data)
		}
	})
	b.Run("Writer32KiB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var out bytes.Buffer
		for b.Loop() {
			out.Reset()
			w := r.Writer(&out)
			for p := data; len(p) > 0; {
				n := min(32<<10, len(p))
				w.Write(p[:n])
				p = p[n:]
			}
			w.Close()
		}
	})
}
