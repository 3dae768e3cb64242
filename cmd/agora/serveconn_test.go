package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// answerSeeds are answers as serve's net/http server writes them (a streamed hand-off, a
// small JSON error, a close-delimited body) and the attacks the reader must refuse.
var answerSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"f\r\n{\"handle\":\"h\"}\n\r\n13\r\n{\"end\":{\"exit\":0}}\n\r\n0\r\n\r\n",
	"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"a\":1}\r\n",
	"HTTP/1.1 200 OK\r\n\r\nall of it\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy",
	"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n",
	"HTTP/2 200\r\n\r\n",
	"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
}

// readAll reads an answer as the front does: its status and its whole body.
func readAll(answer []byte) (int, []byte, error) {
	status, body, err := readAnswer(bufio.NewReaderSize(bytes.NewReader(answer), 64<<10))
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(body)
	return status, b, err
}

// TestReadAnswer: what serve's server writes is read to the byte; a body cut short, a chunk
// size that overflows or is signed, a chunk not ended by CRLF, a bare LF, a duplicated or
// signed length, both framings at once, an encoding other than chunked, a 1xx, a line over
// its bound and another protocol are errors, never a body the front would print.
func TestReadAnswer(t *testing.T) {
	for i, c := range []struct {
		status int
		body   string
	}{
		{200, "{\"handle\":\"h\"}\n{\"end\":{\"exit\":0}}\n"},
		{409, "{\"a\":1}\r\n"},
		{200, "all of it\n"},
		{200, "abc"},
	} {
		status, body, err := readAll([]byte(answerSeeds[i]))
		if err != nil || status != c.status || string(body) != c.body {
			t.Errorf("seed %d: got %d %q %v, want %d %q", i, status, body, err, c.status, c.body)
		}
	}
	for _, a := range answerSeeds[4:] {
		if status, body, err := readAll([]byte(a)); err == nil {
			t.Errorf("%q: read as %d %q, want an error", a, status, body)
		}
	}
	_, _, err := readAll([]byte(answerSeeds[8]))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body shorter than its length: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

// FuzzReadAnswer: any bytes read as an answer never panic, and an answer the front reads is
// one net/http reads alike (the same status and body): the front's reader is no laxer than
// the client it replaces.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range answerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		status, body, err := readAll(answer)
		if err != nil {
			return
		}
		resp, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(answer)), &http.Request{Method: http.MethodPost})
		if herr != nil {
			t.Fatalf("the front read %d %q; net/http refused the answer: %v", status, body, herr)
		}
		hb, herr := io.ReadAll(resp.Body)
		if herr != nil || resp.StatusCode != status || !bytes.Equal(hb, body) {
			t.Fatalf("the front read %d %q; net/http %d %q (%v)", status, body, resp.StatusCode, hb, herr)
		}
	})
}
