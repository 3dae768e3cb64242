package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzPeekBatch: peekBatch calls a body a batch exactly when its first byte after JSON
// whitespace is '[', every body a JSON decoder reads as an array is one, and the SDK still
// reads the whole body from its first significant byte.
func FuzzPeekBatch(f *testing.F) {
	for _, s := range []string{"", " ", "[]", " \t\r\n[{}]", `{"jsonrpc":"2.0"}`, "\v[1]", "\xef\xbb\xbf[1]", "\u00a0[1]", "[", "null", `"["`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxBodyBytes {
			return
		}
		r := httptest.NewRequest(http.MethodPost, httpPath, bytes.NewReader(data))
		got, err := peekBatch(httptest.NewRecorder(), r)
		if err != nil {
			t.Fatalf("peekBatch(%q): %v", data, err)
		}
		rest := bytes.TrimLeft(data, " \t\r\n")
		if want := len(rest) > 0 && rest[0] == '['; got != want {
			t.Fatalf("peekBatch(%q) = %v, want %v", data, got, want)
		}
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) == nil && arr != nil && !got {
			t.Fatalf("%q decodes as an array of %d but passed as no batch", data, len(arr))
		}
		body, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(body, rest) {
			t.Fatalf("body after peek = %q, %v; want %q", body, err, rest)
		}
	})
}

func TestPeekBatch_BodyLimit(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, httpPath, bytes.NewReader(bytes.Repeat([]byte(" "), maxBodyBytes+1)))
	_, err := peekBatch(httptest.NewRecorder(), r)
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		t.Errorf("a body of whitespace past the limit: err = %v, want *http.MaxBytesError", err)
	}
}

// BenchmarkPeekBatch is what the batch check adds to a request: a describe call's body read
// whole as the SDK reads it, with the check ("peek") and without ("read").
func BenchmarkPeekBatch(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agora_dispatch_describe","arguments":{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV"}}}`)
	w := httptest.NewRecorder()
	for _, peek := range []bool{true, false} {
		b.Run(map[bool]string{true: "peek", false: "read"}[peek], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := &http.Request{Body: io.NopCloser(bytes.NewReader(body))}
				if peek {
					if isBatch, err := peekBatch(w, r); isBatch || err != nil {
						b.Fatal(isBatch, err)
					}
				}
				if _, err := io.ReadAll(r.Body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
