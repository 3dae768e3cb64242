package claudeadapter

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/strictjson"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
)

// claudeWrites learns a learn dispatch's claude Write outside the workspace (docs/learn.md,
// "Files written outside the workspace"). claude's hook refuses the call as always, and asks
// the relay (POST /learn/file, the call id only) to learn it first. The worker takes
// everything from the call as claude printed it, never from the request (anything in the
// sandbox can reach the relay): the tool must be Write, its path must be one the hook refuses
// for leaving the workspace (not .git), once per call id. It records file.would_deny with its
// key (reporter hook: claude's word, through its hook) and makes the write in the scratch
// directory, and the hook tells claude where it went. Edit is not learned: claude refuses an
// Edit of a file it has not read, and its fence refuses reads outside the workspace.
type claudeWrites struct {
	scratch *builtin.Scratch
	gw      *agentrun.Gateway
	printed *printedCalls
	dir     string // the workspace

	mu   sync.Mutex
	done map[string]bool // call ids learned (or tried)
}

// errNotLearnable is a request the worker does not learn; the hook keeps its refusal.
var errNotLearnable = errors.New("learn: not a write outside the workspace claude printed")

// learn records and makes call id's write, returning where it went.
func (c *claudeWrites) learn(ctx context.Context, id string) (string, error) {
	c.mu.Lock()
	switch {
	case c.done[id]:
		c.mu.Unlock()
		return "", errors.New("learn: this call's write was learned already")
	case len(c.done) >= maxHookCalls:
		// Anything in the sandbox can ask, with ids claude never printed: bounded.
		c.mu.Unlock()
		return "", errors.New("learn: too many calls in this run")
	}
	c.done[id] = true
	c.mu.Unlock()
	call, ok := c.printed.lookup(ctx, id)
	if !ok || call.name != "Write" {
		return "", errNotLearnable
	}
	var in map[string]json.RawMessage
	var path, content string
	if strictjson.Unmarshal(call.input, &in) != nil || strictjson.Unmarshal(in["file_path"], &path) != nil ||
		strictjson.Unmarshal(in["content"], &content) != nil || path == "" {
		return "", errNotLearnable
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.dir, path)
	}
	path = filepath.Clean(path)
	if editRefusal(path, c.dir, c.dir) != agentrun.RefusalOutsideWorkspace {
		return "", errNotLearnable // inside the workspace, or into .git: the hook's refusal stands
	}
	if err := c.gw.ReportFile(ctx, agentrun.FileReport{Tool: "Write", Path: path, Op: "write", Reason: agentrun.RefusalOutsideWorkspace,
		CallID: agentrun.AuditCallID(id), Via: agentrun.ViaHook}); err != nil {
		return "", err
	}
	return c.scratch.WriteFile(path, content)
}

// serveLearnFile is the relay's POST /learn/file: {"call_id": "..."}; the answer is
// {"path": "..."}, where the write went.
func (r *hookRelay) serveLearnFile(w http.ResponseWriter, req *http.Request, answer func(int, string)) {
	r.mu.Lock()
	c := r.writes
	r.mu.Unlock()
	if c == nil {
		answer(http.StatusNotFound, "learn: this dispatch learns no writes")
		return
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, 512))
	if err != nil {
		answer(http.StatusBadRequest, "learn: the request could not be read")
		return
	}
	var q struct {
		CallID string `json:"call_id"`
	}
	if err := strictjson.UnmarshalKnown(b, &q); err != nil || q.CallID == "" || agentrun.AuditCallID(q.CallID) != q.CallID {
		answer(http.StatusBadRequest, "learn: want {\"call_id\": ...}")
		return
	}
	where, err := c.learn(context.WithoutCancel(req.Context()), q.CallID)
	if err != nil {
		answer(http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"path": where}) //nolint:errcheck // the hook reads what arrives
}

// learnWrites makes c the relay's learner of Writes outside the workspace.
func (r *hookRelay) learnWrites(c *claudeWrites) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = c
}
