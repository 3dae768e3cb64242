package secret

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"testing"
)

// mixedText returns about n bytes of deterministic log-like output: prose, Go code, JSON lines,
// base64 blobs (so "eyJ" near-misses are common), near-miss prefixes, and one real-looking
// credential roughly every 64 KiB.
func mixedText(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "request", "bearer", "of", "task-list", "risk", "sky", "AKIAx", "hooks", "xoxo",
		"github", "ghost", "-----", "BEGIN", "token", "Authorization:", "secret", "sk-", "eyJ", "value"}
	creds := []string{fxAWS, fxGitHub, fxRSA, fxJWT, fxOpenAI, fxAnthropic, fxGoogle, fxSlack, fxStripe, fxBearer}
	var b bytes.Buffer
	for b.Len() < n {
		switch rng.IntN(5) {
		case 0:
			for range 12 {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
		case 1:
			fmt.Fprintf(&b, "func handle%d(ctx context.Context, req *Request) error { return nil }", rng.IntN(1000))
		case 2:
			fmt.Fprintf(&b, `{"level":"info","msg":"request done","status":%d,"path":"/api/v1/items/%d"}`, 200+rng.IntN(300), rng.Uint32())
		case 3:
			blob := make([]byte, 48)
			for i := range blob {
				blob[i] = byte(rng.Uint32())
			}
			b.WriteString(base64.StdEncoding.EncodeToString([]byte(`{"kind":"blob","n":` + fmt.Sprint(rng.IntN(9)) + `}`)))
			b.WriteString(base64.URLEncoding.EncodeToString(blob))
		case 4:
			if rng.IntN(100) == 0 {
				b.WriteString(creds[rng.IntN(len(creds))])
			} else {
				b.WriteString("2026-01-02T03:04:05Z worker started, 0 errors")
			}
		}
		b.WriteByte('\n')
	}
	return b.Bytes()[:n]
}

func BenchmarkScan(b *testing.B) {
	data := mixedText(20 << 20)
	if len(Scan(data, nil)) == 0 {
		b.Fatal("benchmark corpus has no credentials")
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Scan(data, nil)
	}
}
