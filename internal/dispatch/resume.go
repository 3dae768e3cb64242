package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agora-dev/agora/internal/budget"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// ResumeRequest is the request that answers parent, a dispatch that needs input: the same
// pinned subagent, env bundles, target, workspace and revision, and the parent's input plus
// "agora_resume": {question, answer, partial_state}. by says who answers through which door;
// a refusal (by may not answer parent, or parent does not wait for an answer, or was answered
// already) is recorded in the audit log as dispatch.resume.refused before it is returned. The
// answer is taken, once, when [Dispatcher.Accept] records the child.
func (d *Dispatcher) ResumeRequest(ctx context.Context, parent *Record, answer string, by Answerer) (Request, error) {
	if err := mayAnswer(parent, by); err != nil {
		return Request{}, d.refuseAnswer(ctx, parent.ID, by, err)
	}
	switch {
	case parent.State == lifecycle.DispatchAnswered && !(by.Via == ViaOrch && by.RunID != "" && by.RunID == parent.RunID):
		at := time.Time{}
		if parent.AnsweredAt != nil {
			at = *parent.AnsweredAt
		}
		return Request{}, d.refuseAnswer(ctx, parent.ID, by, &AnsweredError{Parent: parent.ID, By: parent.AnsweredBy, At: at, Child: parent.ChildID})
	case parent.State == lifecycle.DispatchAnswered:
		// The run answers its attempt again (a retried task); Accept checks the child it
		// fired before has ended.
	case parent.State != lifecycle.DispatchNeedsInput || parent.Result == nil || parent.Result.NeedsInput == nil:
		return Request{}, d.refuseAnswer(ctx, parent.ID, by, &answerStateError{id: parent.ID, state: parent.State})
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
		ParentID: parent.ID, Actor: by.Actor, CallbackURL: parent.CallbackURL,
		RunID: by.RunID, TaskID: by.TaskID, answer: &answerNote{by: by, sum: answerSum(answer)},
		// The answer's dispatch is judged by the gate its parent was: answering a question
		// never skips it.
		Verify: parent.Verify,
		// The answer to a learn dispatch is one too (a person chose learn for the work);
		// an MCP answerer is refused it at Accept (NoLearn).
		Learn: parent.Learn,
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
