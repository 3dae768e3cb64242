package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
)

// What a describe returns inline; everything larger is a resource away.
const (
	maxPatchText = 64 << 10
	maxFinalText = 16 << 10
	maxTail      = 4 << 10
	// maxContentRead caps what one read of stored content may be: a describe reads the patch
	// whole (to check its hash) only up to this, and a resource read returns at most this.
	maxContentRead = 16 << 20
)

// Results is what a dispatch produced, bounded for a model's context: the patch text and its
// stat, the final answer, the outputs, the tails of the logs, and where to read the rest.
type Results struct {
	ElapsedMS int64 `json:"elapsed_ms"`
	// Phase is where a dispatch that has not ended is, as the host knows it: accepted (being
	// staged) or running (its sandbox started).
	Phase      string       `json:"phase,omitempty"`
	Patch      *PatchView   `json:"patch,omitempty"`
	Diffstat   *Diffstat    `json:"diffstat,omitempty"`
	Final      *TextView    `json:"final,omitempty"`
	Outputs    []OutputView `json:"outputs"`
	StdoutTail string       `json:"stdout_tail,omitempty"`
	StderrTail string       `json:"stderr_tail,omitempty"`
	// TranscriptURI is set when the model runtimes kept a transcript.
	TranscriptURI string `json:"transcript_uri,omitempty"`
}

// PatchView is the patch inline, cut at maxPatchText.
type PatchView struct {
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	// Binary is set when the text held bytes that are not UTF-8 (a binary file's literal
	// data): read the resource for the exact bytes.
	Binary bool `json:"binary,omitempty"`
	// Escaped is set when the text shows a hidden character escaped (agenttext.Escape: a CR
	// of a CRLF file as \x0d, an emoji's zero-width joiner as \u200d, a BOM, a bidirectional
	// control), so the text is not the patch's bytes: read the resource for them (the bytes
	// Digest names). Unset, the text is the bytes (when neither Truncated nor Binary).
	Escaped bool   `json:"escaped,omitempty"`
	URI     string `json:"uri"`
}

// TextView is an output's text inline, cut at its limit.
type TextView struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	// Escaped is set when the text shows a hidden character escaped, as PatchView's: the
	// resource has the bytes.
	Escaped bool   `json:"escaped,omitempty"`
	Size    int64  `json:"size"`
	URI     string `json:"uri"`
}

// OutputView is one output file: its size and where to read it.
type OutputView struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	URI  string `json:"uri"`
}

// results reads what r produced. A part that cannot be read is left out and said in notes;
// a terminal record's results never change, so they are kept (cache).
func (s *Server) results(ctx context.Context, r *Record) (*Results, []string) {
	if r.Done {
		if c, ok := s.resultCache.get(r.ID); ok {
			return c.res, c.notes
		}
	}
	var notes []string
	end := time.Now()
	if r.EndedAt != nil {
		end = *r.EndedAt
	}
	res := &Results{ElapsedMS: end.Sub(r.CreatedAt).Milliseconds(), Outputs: []OutputView{}}
	if !r.Done {
		res.Phase = "accepted"
		if r.StartedAt != nil {
			res.Phase = "running"
		}
	}
	base := "agora://dispatches/" + r.ID
	if a := r.Patch; a != nil {
		pv := &PatchView{Digest: a.Digest, Size: a.Size, URI: base + "/patch"}
		if a.Size > maxContentRead {
			pv.Truncated = true
			notes = append(notes, fmt.Sprintf("the patch is %d bytes, over the %d bytes read here: `agora dispatch patch %s` on the host has it", a.Size, maxContentRead, r.ID))
		} else if b, err := s.cfg.Dispatcher.Content(ctx, a.Digest, maxContentRead); err != nil {
			notes = append(notes, "the patch could not be read: "+s.scrub(err.Error()))
		} else {
			ds := diffstat(b)
			res.Diffstat = &ds
			pv.Text, pv.Truncated = cutText(b, maxPatchText)
			// Judged on what the text shows, less a character the cut split.
			head, _ := cutBytes(b, maxPatchText)
			pv.Binary = !utf8.Valid(head)
			pv.Escaped = hasHidden(pv.Text)
		}
		res.Patch = pv
	}
	for _, o := range r.Outputs {
		uri := base + "/outputs/" + escapeName(o.Path)
		res.Outputs = append(res.Outputs, OutputView{Path: o.Path, Size: o.Size, URI: uri})
		if o.Path != "final.md" {
			continue
		}
		b, err := s.cfg.Dispatcher.Content(ctx, o.Digest, maxContentRead)
		if err != nil {
			notes = append(notes, "final.md could not be read: "+s.scrub(err.Error()))
			continue
		}
		text, cut := cutText(b, maxFinalText)
		res.Final = &TextView{Text: text, Truncated: cut, Escaped: hasHidden(text), Size: o.Size, URI: uri}
	}
	res.StdoutTail = s.tail(ctx, r.Stdout, &notes)
	res.StderrTail = s.tail(ctx, r.Stderr, &notes)
	if r.Transcript != nil {
		res.TranscriptURI = base + "/transcript"
	}
	if r.Done {
		s.resultCache.put(r.ID, cachedResults{res: res, notes: notes})
	}
	return res, notes
}

// hasHidden reports whether s (valid UTF-8) holds a character [Server.encode] escapes, so
// that the text a client decodes is not s.
func hasHidden(s string) bool {
	for _, r := range s {
		if agenttext.Hidden(r) {
			return true
		}
	}
	return false
}

// escapeName percent-encodes every byte of an output's name but the unreserved characters
// of RFC 3986 (letters, digits, - . _ ~), as a URI template's {name} expands it: url.PathEscape
// leaves + & = ; and others as they are, which the template then does not match.
func escapeName(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// tail is the last maxTail bytes of a log, from a valid UTF-8 boundary.
func (s *Server) tail(ctx context.Context, a *Artifact, notes *[]string) string {
	if a == nil || a.Size == 0 {
		return ""
	}
	if a.Size > maxContentRead {
		*notes = append(*notes, fmt.Sprintf("a log is %d bytes, over the %d bytes read here", a.Size, maxContentRead))
		return ""
	}
	b, err := s.cfg.Dispatcher.Content(ctx, a.Digest, maxContentRead)
	if err != nil {
		*notes = append(*notes, "a log could not be read: "+s.scrub(err.Error()))
		return ""
	}
	return tailText(b, maxTail)
}

// tailText is the end of b as text, at most n bytes, from a character boundary. Bytes that
// are not UTF-8 become U+FFFD; when that makes the text longer than n, whole characters are
// dropped from its start.
func tailText(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	for len(s) > n {
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s
}

// cutText is b as text, at most n bytes cut at a rune boundary, and whether it was cut.
// Bytes that are not UTF-8 become U+FFFD; when that makes the text longer than n, whole
// characters are dropped from its end.
func cutText(b []byte, n int) (string, bool) {
	head, cut := cutBytes(b, n)
	s := strings.ToValidUTF8(string(head), "\uFFFD")
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s, cut = s[:len(s)-size], true
	}
	return s, cut
}

// cutBytes is b cut to at most n bytes, less a character the cut split, and whether it was cut.
func cutBytes(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return b, false
	}
	b = b[:n]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b, true
}

type cachedResults struct {
	res   *Results
	notes []string
	// enc is describe's whole answer, encoded; nil until the first describe.
	enc []byte
}

// resultCache keeps the results of the last terminal dispatches described.
type resultCache struct {
	mu    sync.Mutex
	byID  map[string]cachedResults
	order []string
}

const maxCachedResults = 256

func (c *resultCache) get(id string) (cachedResults, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	return r, ok
}

// encoded is describe's encoded answer for the terminal dispatch id, if kept.
func (c *resultCache) encoded(id string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	return r.enc, ok && r.enc != nil
}

// putEncoded keeps describe's encoded answer next to the results it was made of.
func (c *resultCache) putEncoded(id string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.byID[id]; ok {
		r.enc = b
		c.byID[id] = r
	}
}

func (c *resultCache) put(id string, r cachedResults) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]cachedResults{}
	}
	if _, ok := c.byID[id]; !ok {
		if len(c.order) == maxCachedResults {
			delete(c.byID, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, id)
	}
	c.byID[id] = r
}
