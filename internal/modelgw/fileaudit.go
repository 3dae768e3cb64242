package modelgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// A learn dispatch's write outside the workspace (docs/learn.md, "Files written outside the
// workspace"): the worker's own tools judge each path at the call (openai's write_file,
// codex's gate on a patch's paths, claude's hook on Write and Edit), report it here, and make
// the write into a scratch directory inside the sandbox, never at the path asked for. The
// gateway records it as entry.FileWouldDeny, with who could have sent it (workerkey.go): a
// grant holds no file paths, so suggest only lists it, and lists one the agent could have
// forged as such.

// maxFileAuditRequest caps a /audit/file request body.
const maxFileAuditRequest = 8 << 10

// MaxWouldDenyPath caps the path a file.would_deny carries. A longer path is refused (the
// worker then refuses the write): a path cut on record would name another file.
const MaxWouldDenyPath = 1024

// Ops of a file.would_deny: a whole file written (openai's write_file, claude's Write, a
// patch's Add File), one edited in place (claude's Edit, a patch's Update File), deleted, or
// moved (a patch's Move to: the path is the destination).
const (
	FileOpWrite  = "write"
	FileOpEdit   = "edit"
	FileOpDelete = "delete"
	FileOpMove   = "move"
)

// fileAuditRequest is the body of POST /audit/file.
type fileAuditRequest struct {
	Tool   string `json:"tool"`
	Path   string `json:"path"`
	Op     string `json:"op"`
	Reason string `json:"reason"`
	// CallID is the runtime's id of the call, when it has one (claude's tool_use_id).
	CallID string `json:"call_id"`
}

// fileAuditFields are the fields a /audit/file body may have, each at most once.
var fileAuditFields = []string{"tool", "path", "op", "reason", "call_id"}

// validate checks every field; messages name the field and never repeat its value.
func (f *fileAuditRequest) validate() error {
	if err := checkToolName(f.Tool); err != nil {
		return fmt.Errorf("tool: %s", err)
	}
	if err := checkWouldDenyPath(f.Path); err != nil {
		return fmt.Errorf("path: %s", err)
	}
	switch f.Op {
	case FileOpWrite, FileOpEdit, FileOpDelete, FileOpMove:
	default:
		return fmt.Errorf("op: want %s, %s, %s or %s", FileOpWrite, FileOpEdit, FileOpDelete, FileOpMove)
	}
	if err := checkReason(f.Reason); err != nil {
		return fmt.Errorf("reason: %s", err)
	}
	if err := checkCallID(f.CallID); err != nil {
		return fmt.Errorf("call_id: %s", err)
	}
	return nil
}

// checkWouldDenyPath accepts a path as the sandbox names it: 1 to MaxWouldDenyPath bytes of
// valid UTF-8 without control characters (a path is shown to a person, and a terminal
// escape in it would speak for agora).
func checkWouldDenyPath(p string) error {
	if p == "" || len(p) > MaxWouldDenyPath {
		return fmt.Errorf("want 1 to %d bytes, got %d", MaxWouldDenyPath, len(p))
	}
	if !utf8.ValidString(p) {
		return errors.New("not valid UTF-8")
	}
	if strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return errors.New("holds a control character")
	}
	return nil
}

// serveFileAudit records a learn dispatch's write outside the workspace as
// entry.FileWouldDeny before the worker makes it (into its scratch directory; the worker
// writes only on 204). A gateway that is not a learn dispatch's refuses it unrecorded: there
// the write stays refused, and the sandbox cannot make itself a learn dispatch.
func (g *Gateway) serveFileAudit(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if r.Method != http.MethodPost {
		g.methodNotAllowed(w, ex, http.MethodPost)
		return
	}
	if !g.learn {
		g.refuse(w, ex, http.StatusBadRequest, "file audit: this dispatch is not a learn dispatch; a write outside the workspace is refused")
		return
	}
	body, ok := g.readBody(w, r, ex, maxFileAuditRequest)
	if !ok {
		return
	}
	var f fileAuditRequest
	if err := decodeFlat(body, fileAuditFields, &f); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "file audit: "+err.Error())
		return
	}
	if err := f.validate(); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "file audit: "+err.Error())
		return
	}
	if g.red.String(f.Tool) != f.Tool || g.red.String(f.CallID) != f.CallID {
		g.refuse(w, ex, http.StatusBadRequest, "file audit: tool or call_id holds a secret of this dispatch; the report is refused, not recorded")
		return
	}
	details := map[string]any{
		"dispatch":    g.dispatchID,
		entry.KeyRole: g.role,
		entry.KeyTool: f.Tool,
		// The path is free text a person reads: a secret in it is masked, not refused.
		entry.KeyPath:     g.red.String(f.Path),
		entry.KeyOp:       f.Op,
		entry.KeyReason:   g.red.String(f.Reason),
		entry.KeyReporter: g.worker.reporter(r),
	}
	if f.CallID != "" {
		details["call_id"] = f.CallID
	}
	if err := g.audit.Record(context.WithoutCancel(r.Context()), entry.FileWouldDeny, details); err != nil {
		g.fail(w, ex, http.StatusServiceUnavailable, decisionError, "file audit: the record was not kept")
		return
	}
	ex.decision = decisionAllowed
	w.WriteHeader(http.StatusNoContent)
}
