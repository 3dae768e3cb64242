package modelgw

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agora-dev/agora/internal/budget"
)

// streamBuf is the read size when copying a response.
const streamBuf = 32 << 10

// errOverCap reports an upstream body longer than the gateway's cap.
var errOverCap = errors.New("over the response size limit")

// copyModelBody copies the model response to w through the key redactor, at most g.maxBody
// bytes; a longer body is an error. An event stream is passed on line by line as it arrives,
// each line redacted whole and flushed: a key has no line break in it, so no form of it can
// straddle two lines, and nothing is held back waiting for the next event.
//
// count, when not nil, reads the response's usage from the upstream bytes as they pass.
func (g *Gateway) copyModelBody(w http.ResponseWriter, resp *http.Response, count *budget.Response) error {
	var src io.Reader = &capReader{r: resp.Body, left: g.maxBody}
	if count != nil {
		src = io.TeeReader(src, count)
	}
	if !isEventStream(resp.Header.Get("Content-Type")) {
		rw := g.red.Writer(w)
		if _, err := io.Copy(rw, src); err != nil {
			return copyError(err, g.maxBody)
		}
		return rw.Close()
	}
	rc := http.NewResponseController(w)
	buf := make([]byte, streamBuf)
	var pending []byte
	for {
		n, rerr := src.Read(buf)
		pending = append(pending, buf[:n]...)
		if i := bytes.LastIndexAny(pending, "\r\n"); i >= 0 {
			if err := g.emit(w, rc, pending[:i+1]); err != nil {
				return err
			}
			pending = append(pending[:0], pending[i+1:]...)
		}
		if rerr == io.EOF {
			return g.emit(w, rc, pending)
		}
		if rerr != nil {
			return copyError(rerr, g.maxBody)
		}
	}
}

// emit writes the redacted segment and flushes it to the client.
func (g *Gateway) emit(w http.ResponseWriter, rc *http.ResponseController, seg []byte) error {
	if len(seg) == 0 {
		return nil
	}
	if _, err := w.Write(g.red.Bytes(seg)); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush response: %w", err)
	}
	return nil
}

func copyError(err error, limit int64) error {
	if errors.Is(err, errOverCap) {
		return fmt.Errorf("model response over the %d byte limit", limit)
	}
	return fmt.Errorf("copy model response: %s", describe(err))
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// capReader passes at most left bytes of r and fails with errOverCap if r has more.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1] // one byte more than allowed reveals an overlong body
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		n, c.left = int(c.left), 0
		return n, errOverCap
	}
	c.left -= int64(n)
	return n, err
}

// maxCodingInError caps how much of an upstream's content coding an error repeats.
const maxCodingInError = 32

// checkCoding refuses a body in a content coding other than identity. The gateway asks every
// upstream for identity, so that the key redactor sees the bytes the sandbox gets: a
// compressed body would carry the key past it. Decoding instead would
// put a decompressor, and its bombs, in front of the redactor for no gain. The header is a
// comma-separated list (RFC 9110, section 8.4) whose empty elements are ignored.
func checkCoding(h http.Header) error {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.Trim(c, " \t")
			if c != "" && !strings.EqualFold(c, "identity") {
				return &codingError{coding: quoted(c, maxCodingInError)}
			}
		}
	}
	return nil
}

// codingError is an upstream body in a content coding the gateway does not pass: answered
// 502, audited as denied.
type codingError struct{ coding string }

func (e *codingError) Error() string {
	return fmt.Sprintf("upstream answered in content coding %s; the gateway asks for identity and passes only plain bodies", e.coding)
}

// maskTruncated redacts a body cut at the gateway's cap. The cut may fall inside a form of
// the key, whose first part no form matches: what the stream redactor still holds back at the
// cut (fewer bytes than the longest form) is dropped rather than flushed.
func (g *Gateway) maskTruncated(data []byte) []byte {
	var buf bytes.Buffer
	w := g.red.Writer(&buf)
	w.Write(data) // a bytes.Buffer does not fail
	return buf.Bytes()
}

// readCapped reads at most limit bytes of r and reports whether r had more.
func readCapped(r io.Reader, limit int64) (data []byte, truncated bool, err error) {
	data, err = io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(data)) > limit {
		return data[:limit], true, err
	}
	return data, false, err
}
