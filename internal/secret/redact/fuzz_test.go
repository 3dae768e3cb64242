package redact

import (
	"bytes"
	"testing"
)

func FuzzRedactWriter(f *testing.F) {
	f.Add([]byte("fuzz-secret-1"), []byte("a fuzz-secret-1 b ZnV6ei1zZWNyZXQtMQ== c"), []byte{1, 2, 3})
	f.Add([]byte("aaaaaaaa"), []byte("aaaaaaaaaaaaaaaaaaaaa"), []byte{7})
	f.Add([]byte("short"), []byte("short text"), []byte{})
	f.Add(canary, append([]byte("x"), canary...), []byte{0, 5, 255})
	f.Fuzz(func(t *testing.T, secret, data, cuts []byte) {
		r := New([][]byte{secret, canary})
		want := r.Bytes(data)

		var buf bytes.Buffer
		w := r.Writer(&buf).(*writer)
		for i, rest := 0, data; len(rest) > 0; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(int(cuts[i%len(cuts)])+1, len(rest))
			}
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			if len(w.pending) > max(r.maxLen-1, 0) {
				t.Fatalf("holding %d bytes, want at most %d", len(w.pending), r.maxLen-1)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("streamed %q, Bytes %q", buf.Bytes(), want)
		}
		// A secret holding '[' or ']' can reappear across a Mask's edge without leaking anything.
		if len(secret) >= MinLen && !bytes.ContainsAny(secret, "[]") && !bytes.Contains([]byte(Mask), secret) &&
			bytes.Contains(want, secret) {
			t.Fatalf("output %q still contains the secret %q", want, secret)
		}
	})
}
