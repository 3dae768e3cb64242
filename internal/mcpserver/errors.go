package mcpserver

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/errclass"
)

// notFound replaces a port's not-found error with one naming the id, worded as the CLI words
// it (errclass: `dispatch "X" not found`), keeping the port's note (a run retention purged:
// when and why); other errors pass.
func notFound(err error, what, id string) error {
	if errors.Is(err, ErrNotFound) {
		nf := &errclass.NotFoundError{Kind: what, ID: id, Of: ErrNotFound}
		var port *errclass.NotFoundError
		if errors.As(err, &port) {
			nf.Note = port.Note
		}
		return nf
	}
	return err
}

// maxErrorLen caps a tool error's message.
const maxErrorLen = 400

// publicError is the one sentence a caller gets for err from tool: known conditions in their
// own words, anything else as an internal error whose details go to the server log only.
func (s *Server) publicError(tool string, err error) string {
	var (
		ae *ArgumentError
		re *RequestError
		nf *errclass.NotFoundError
	)
	switch {
	case errors.As(err, &ae):
		return s.scrub(tool + ": " + ae.Msg)
	case errors.As(err, &nf):
		return s.scrub(nf.Error())
	case errors.As(err, &re):
		return s.scrub(tool + " refused: " + re.Msg)
	case errors.Is(err, ErrOrchestratorDown):
		return ErrOrchestratorDown.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return tool + " was cancelled before it completed"
	}
	s.log.Error("tool failed", "tool", tool, "err", s.scrub(err.Error()))
	return tool + " could not complete because of an internal error; the server log has the details"
}

// hostPath matches an absolute host path of at least two components (or a home-relative one)
// where a path may start: a message's start, after a space, quote, bracket, '=', ':' or ','.
var hostPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|[\s"'(\[=:,])(~?/[^\s"'()\[\],;:]+/[^\s"'()\[\],;:]*)`)
})

// scrub makes a message fit to leave the server: one line, no host paths, no tokens, no
// hidden character (escaped as agenttext.Escape writes it: a bidirectional control, a C0 or C1
// control, an ANSI sequence's ESC, a zero-width character), bounded.
func (s *Server) scrub(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	msg = hostPath().ReplaceAllString(msg, "${1}<path>")
	msg = s.redactor.String(msg)
	msg = agenttext.Escape(msg)
	if len(msg) > maxErrorLen {
		cut := maxErrorLen
		for cut > 0 && msg[cut]&0xC0 == 0x80 { // don't split a UTF-8 sequence
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}
