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

// responseBody is 4 MiB of what a bound API host answers: pretty-printed JSON with URLs
// (percent escapes), a few base64 blobs wrapped at 76 and \u escapes, in which value appears
// now and then, raw and base64-encoded.
func responseBody(rng *rand.Rand, value []byte) []byte {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var in bytes.Buffer
	blob := make([]byte, 300)
	for in.Len() < 4<<20 {
		switch rng.IntN(200) {
		case 0:
			fmt.Fprintf(&in, "  \"token\": %q,\n", value)
		case 1:
			for i := range blob {
				blob[i] = byte(rng.IntN(256))
			}
			b := base64.StdEncoding.EncodeToString(blob)
			for len(b) > 76 {
				in.WriteString(b[:76] + "\n")
				b = b[76:]
			}
			in.WriteString(b + "\n")
		default:
			id := make([]byte, 12)
			for i := range id {
				id[i] = alnum[rng.IntN(len(alnum))]
			}
			fmt.Fprintf(&in, "  {\n    \"id\": \"%s\",\n    \"url\": \"https://api.example.com/v1/items/%s?q=a%%20b&sort=desc\",\n    \"title\": \"Caf\\u00e9 item %d\",\n    \"count\": %d\n  },\n",
				id, id, rng.IntN(100000), rng.IntN(5000))
		}
	}
	return in.Bytes()[:4<<20]
}

// BenchmarkRedactResponse masks one 40-byte bound value in 4 MiB of an API response, with the
// exact redactor (New: the value as it is) and the strict one (NewStrict:
// white space, escapes and pieces). Writer32KiB is how the proxy streams a body.
func BenchmarkRedactResponse(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	value := []byte("ghp_R3aLs3cr3tVALUE0123456789abcdefghij")
	data := responseBody(rng, value)
	for _, mode := range []struct {
		name string
		r    *Redactor
	}{{"New", New([][]byte{value})}, {"NewStrict", NewStrict([][]byte{value})}} {
		if bytes.Equal(mode.r.Bytes(data), data) {
			b.Fatal("benchmark input has nothing to redact")
		}
		b.Run(mode.name+"/Bytes", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				mode.r.Bytes(data)
			}
		})
		b.Run(mode.name+"/Writer32KiB", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				w := mode.r.Writer(&out)
				for p := data; len(p) > 0; {
					n := min(32<<10, len(p))
					w.Write(p[:n])
					p = p[n:]
				}
				w.Close()
			}
		})
	}
}

// BenchmarkNewStrict builds the strict index of one random value of 64 bytes (a token), 1 KiB
// and 64 KiB (the largest secret); the proxy builds one per set of bound values and keeps it.
func BenchmarkNewStrict(b *testing.B) {
	for _, n := range []int{64, 1 << 10, 64 << 10} {
		rng := rand.New(rand.NewPCG(uint64(n), 2))
		value := make([]byte, n)
		for i := range value {
			value[i] = byte(rng.IntN(256))
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				NewStrict([][]byte{value})
			}
		})
	}
}
