package dispatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agora-dev/agora/internal/budget"
	"time"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// ResumeRequest is the request that answers parent, a dispatch that needs input: the same
// pinned subagent, env bundles, target, workspace and revision, and the parent's input plus
// "agora_resume": {question, answer, partial_state}.
func (d *Dispatcher) ResumeRequest(parent *Record, answer, actor string) (Request, error) {
	if parent.State != StateNeedsInput || parent.Result == nil || parent.Result.NeedsInput == nil {
		return Request{}, fmt.Errorf("dispatch %s is %s; only a dispatch that needs input can be resumed", parent.ID, parent.State)
	}
	raw, err := d.Blobs.Get(parent.InputDigest, wire.MaxInputJSON)
	if err != nil {
		return Request{}, err
	}
	var input map[string]any
	if err := json.Unmarshal(raw, &input); err != nil {
		return Request{}, err
	}
	ni := parent.Result.NeedsInput
	resume := map[string]any{"question": ni.Question, "answer": answer}
	if len(ni.PartialState) > 0 {
		resume["partial_state"] = json.RawMessage(ni.PartialState)
	}
	input["agora_resume"] = resume
	b, err := json.Marshal(input)
	if err != nil {
		return Request{}, err
	}
	if _, err := wire.CanonicalInput(b); errors.Is(err, wire.ErrInputTooLarge) {
		return Request{}, reqErr("resume %s: the parent's input with the answer in agora_resume is too large (%v); "+
			"give a shorter answer or dispatch anew with a smaller input", parent.ID, err)
	}
	envs := make([]string, len(parent.Envs))
	for i, e := range parent.Envs {
		envs[i] = e.Name + "@" + string(e.Digest)
	}
	req := Request{
		Subagent: parent.Subagent + "@" + string(parent.SubagentDigest), Envs: envs, Target: parent.Target,
		Input: b, Repo: parent.Repo, Revision: parent.Revision, Timeout: time.Duration(parent.Timeout),
		ParentID: parent.ID, Actor: actor, CallbackURL: parent.CallbackURL,
	}
	if parent.Workspace != "" {
		// The same workspace version at the same commit, checked again against its patterns.
		req.Workspace, req.Repo = parent.Workspace, ""
	}
	if parent.Budget != nil {
		// The answer runs under the budget its parent ran under (counted afresh), never
		// under a wider one the parent's narrowing left behind.
		req.Ceilings = []budget.Ceiling{{Source: "dispatch " + parent.ID, Budget: *parent.Budget}}
	}
	return req, nil
}
