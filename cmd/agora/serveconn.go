package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The front speaks to serve's socket itself: one HTTP/1.1 request per connection, closed
// after the answer, the bytes net/http's client sent with keep-alives off; and it reads
// exactly the answers serve's net/http server writes (a status line, headers, then a body
// of a Content-Length, chunked, or up to the close). net/http, and the TLS, x509 and HTTP/2
// it links, were two thirds of the front's binary and a third of its package inits, paid by
// every `agora` command before it dials.

// Bounds of what the front reads of an answer before its body.
const (
	maxAnswerLine   = 4 << 10
	maxAnswerHead   = 64 << 10
	maxChunkSizeHex = 15 // a chunk under 2^60 bytes: no overflow
)

var errAnswer = errors.New("malformed answer from serve")

// serveConn is one request to serve: its connection and the answer's reader. The socket is
// a blocking one, read and written by the calling goroutine: the front has no use for Go's
// network poller, whose start (and the net package's) was most of its 0.12 ms dial.
type serveConn struct {
	f    *os.File
	fd   int
	br   *bufio.Reader
	peer int32 // serve's pid, as this process sees it (SO_PEERCRED)
}

// dialServe connects to serve's socket within handoffDial, only to a listener of this user.
func dialServe(sock string) (*serveConn, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	s := &serveConn{f: os.NewFile(uintptr(fd), sock), fd: fd}
	// A Unix socket's connect waits (for room in the listener's backlog) as long as its
	// send timeout.
	if err := s.timeout(handoffDial); err != nil {
		s.Close()
		return nil, err
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		s.Close()
		return nil, &os.PathError{Op: "connect", Path: sock, Err: err}
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || int(cred.Uid) != os.Getuid() {
		s.Close()
		return nil, errors.New("serve's socket is held by another user")
	}
	s.peer = cred.Pid
	s.br = bufio.NewReaderSize(s.f, 64<<10)
	return s, nil
}

// timeout bounds each send and receive on the socket from now on; zero: no bound.
func (s *serveConn) timeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
		if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

// post sends body to path and reads the answer's status and headers, each read and write
// within handoffAnswer; the body that follows is read without a bound (a dispatch takes as
// long as it takes).
func (s *serveConn) post(path string, body []byte) (int, io.Reader, error) {
	if err := s.timeout(handoffAnswer); err != nil {
		return 0, nil, err
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: agora\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", path, len(body))
	req.Write(body)
	if _, err := s.f.Write(req.Bytes()); err != nil {
		return 0, nil, err
	}
	status, r, err := readAnswer(s.br)
	if err != nil {
		return 0, nil, err
	}
	if err := s.timeout(0); err != nil {
		return 0, nil, err
	}
	return status, r, nil
}

func (s *serveConn) Close() error { return s.f.Close() }

// readAnswer reads an HTTP/1.1 answer's status line and headers from br and returns its
// status and a reader of its body.
func readAnswer(br *bufio.Reader) (int, io.Reader, error) {
	budget := maxAnswerHead
	line, err := readCRLF(br, &budget)
	if err != nil {
		return 0, nil, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	if proto != "HTTP/1.1" || len(code) != 3 || code[0] < '1' || code[0] > '5' || !decimal(code) {
		return 0, nil, fmt.Errorf("%w: status line %q", errAnswer, line)
	}
	status, _ := strconv.Atoi(code)
	chunked, length := false, int64(-1)
	for {
		if line, err = readCRLF(br, &budget); err != nil {
			return 0, nil, err
		}
		if line == "" {
			break
		}
		k, v, err := header(line)
		if err != nil {
			return 0, nil, err
		}
		switch {
		case strings.EqualFold(k, "Transfer-Encoding"):
			if chunked || !strings.EqualFold(v, "chunked") {
				return 0, nil, fmt.Errorf("%w: transfer encoding %q", errAnswer, v)
			}
			chunked = true
		case strings.EqualFold(k, "Content-Length"):
			n, err := strconv.ParseInt(v, 10, 64)
			if length >= 0 || err != nil || n < 0 || !decimal(v) {
				return 0, nil, fmt.Errorf("%w: content length %q", errAnswer, v)
			}
			length = n
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
		// No body: and a 1xx is never an answer the front's request gets.
		return 0, nil, fmt.Errorf("%w: status %d", errAnswer, status)
	case chunked && length >= 0:
		return 0, nil, fmt.Errorf("%w: both chunked and a content length", errAnswer)
	case chunked:
		return status, &chunkedBody{br: br}, nil
	case length >= 0:
		return status, &lengthBody{r: br, n: length}, nil
	}
	return status, br, nil
}

// decimal reports whether s is one or more ASCII digits.
func decimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// header splits a header (or trailer) line into its name and value.
func header(line string) (string, string, error) {
	k, v, ok := strings.Cut(line, ":")
	if !ok || !token(k) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return "", "", fmt.Errorf("%w: header line %q", errAnswer, line)
	}
	return k, strings.Trim(v, " \t"), nil
}

// token reports whether s is an HTTP token (RFC 9110 5.6.2), as a header's name must be.
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// readCRLF reads one line ended by CRLF, without it, charging its bytes to budget; a line
// over maxAnswerLine or the budget is an error.
func readCRLF(br *bufio.Reader, budget *int) (string, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxAnswerLine || len(line) > *budget {
			return "", fmt.Errorf("%w: a line over %d bytes", errAnswer, min(maxAnswerLine, *budget))
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
	*budget -= len(line)
	s, ok := strings.CutSuffix(string(line), "\r\n")
	if !ok || strings.ContainsAny(s, "\r\n\x00") {
		return "", fmt.Errorf("%w: a line not ended by CRLF", errAnswer)
	}
	return s, nil
}

// lengthBody is a body of n bytes: the stream ending before them is io.ErrUnexpectedEOF.
type lengthBody struct {
	r io.Reader
	n int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// chunkedBody decodes a chunked body (RFC 9112 7.1): chunks of a hexadecimal size, each
// followed by CRLF, ended by a zero-size chunk and trailers, which it reads and drops.
type chunkedBody struct {
	br   *bufio.Reader
	left int64 // bytes left of the current chunk
	err  error
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left == 0 {
		if b.err = b.next(); b.err != nil {
			return 0, b.err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	switch {
	case err == io.EOF:
		b.err = io.ErrUnexpectedEOF
	case err != nil:
		b.err = err
	case b.left == 0:
		b.err = b.crlf()
	}
	if n > 0 && b.err != nil && b.err != io.EOF {
		// The bytes read are the body's: the error is for the next Read.
		return n, nil
	}
	return n, b.err
}

// next reads the next chunk's size line; at the last chunk it reads the trailers and
// returns io.EOF.
func (b *chunkedBody) next() error {
	budget := maxAnswerHead
	line, err := readCRLF(b.br, &budget)
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(line, ";") // chunk extensions are dropped
	size = strings.TrimRight(size, " \t")
	if size == "" || len(size) > maxChunkSizeHex {
		return fmt.Errorf("%w: chunk size %q", errAnswer, line)
	}
	n, err := strconv.ParseInt(size, 16, 64)
	if err != nil || n < 0 || strings.ContainsAny(size, "+-_xX") {
		return fmt.Errorf("%w: chunk size %q", errAnswer, line)
	}
	if n > 0 {
		b.left = n
		return nil
	}
	for {
		if line, err = readCRLF(b.br, &budget); err != nil {
			return err
		}
		if line == "" {
			return io.EOF
		}
		if _, _, err := header(line); err != nil {
			return err
		}
	}
}

// crlf reads the CRLF that ends a chunk's data.
func (b *chunkedBody) crlf() error {
	var end [2]byte
	if _, err := io.ReadFull(b.br, end[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if end != [2]byte{'\r', '\n'} {
		return fmt.Errorf("%w: a chunk not ended by CRLF", errAnswer)
	}
	return nil
}
