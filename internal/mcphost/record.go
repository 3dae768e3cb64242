package mcphost

import (
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// record is the MCP view of a record: no repository path, callback URL, provider task id or
// partial state. A workspace dispatch shows the workspace version and the commit; its path is
// also cut out of the detail, where a failed checkout would name it.
func record(r *dispatch.Record) *mcpserver.Record {
	out := &mcpserver.Record{
		ID: r.ID, State: r.State, Done: lifecycle.DispatchEnded(r.State), Reason: r.Reason, Detail: r.Detail,
		ExitCode: r.ExitCode, Subagent: r.Subagent, SubagentDigest: string(r.SubagentDigest), Envs: []mcpserver.EnvRef{},
		Target: r.Target, Sandbox: r.Sandbox, Network: r.Network, Isolation: r.Isolation,
		InputDigest: string(r.InputDigest), TimeoutSeconds: int64(time.Duration(r.Timeout) / time.Second),
		ParentID: r.ParentID, Actor: r.Actor, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, EndedAt: r.EndedAt,
		Outputs: []mcpserver.Output{}, Events: []mcpserver.Event{},
	}
	if r.Workspace != "" {
		out.Workspace, out.Revision = r.Workspace, r.Revision
	}
	out.ChildID, out.AnsweredBy, out.AnsweredAt = r.ChildID, r.AnsweredBy, r.AnsweredAt
	out.RunID, out.TaskID = r.RunID, r.TaskID
	if n := r.Net; n != nil {
		out.Net = &mcpserver.Net{Reached: n.Reached, Refused: n.Refused, BytesUp: n.BytesUp, BytesDown: n.BytesDown}
	}
	if b := r.Budget; b != nil {
		out.Budget = &mcpserver.Budget{Tokens: b.Tokens, USD: b.USD, ModelCalls: b.ModelCalls}
	}
	if u := r.Usage; u != nil {
		out.Usage = &mcpserver.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CachedTokens: u.CachedTokens, ModelCalls: u.ModelCalls, CostUSD: u.CostUSD}
	}
	// The repository's path is cut from the host's text and from what the agent wrote (it
	// can read it from git); the server also drops every other path from the detail.
	m := hostpath.New(r.Repo)
	out.Detail, out.Reason = m.HostText(out.Detail), m.HostText(out.Reason)
	out.Phase = r.Phase
	out.Learn = r.Learn
	if r.Verify != nil {
		s := *r.Verify
		out.Verify = &s
	}
	if r.Verdict != nil {
		v := *r.Verdict
		v.Detail, v.OutputTail, v.Cache = m.HostText(v.Detail), m.Text(v.OutputTail), m.HostText(v.Cache)
		out.Verdict = &v
	}
	for _, a := range r.Approvals {
		if a.State == dispatch.ApprovalPending && r.Phase != "" {
			out.AwaitingApproval = append(out.AwaitingApproval, mcpserver.HeldCall{
				CallID: a.CallID, Tool: a.Tool, Rule: a.Rule, ArgsDigest: a.ArgsDigest, ArgsBytes: a.ArgsBytes,
				Preview: a.Preview, ExpiresAt: a.ExpiresAt,
			})
		}
	}
	for _, e := range r.Envs {
		out.Envs = append(out.Envs, mcpserver.EnvRef{Name: e.Name, Digest: string(e.Digest)})
	}
	for _, e := range r.Events {
		out.Events = append(out.Events, mcpserver.Event{Kind: e.Kind, At: e.At})
	}
	if res := r.Result; res != nil {
		out.Patch, out.Stdout, out.Stderr = artifact(res.Patch), artifact(res.Stdout), artifact(res.Stderr)
		out.Transcript = artifact(res.Transcript)
		out.Truncated = res.Truncated
		for _, o := range res.Outputs {
			out.Outputs = append(out.Outputs, mcpserver.Output{Path: o.Path, Digest: string(o.Digest), Size: o.Size})
		}
		if n := res.NeedsInput; n != nil {
			out.NeedsInput = &mcpserver.NeedsInput{Question: m.Text(n.Question)}
			for _, o := range n.Options {
				out.NeedsInput.Options = append(out.NeedsInput.Options, m.Text(o))
			}
		}
	}
	return out
}

func artifact(a *dispatch.Artifact) *mcpserver.Artifact {
	if a == nil {
		return nil
	}
	return &mcpserver.Artifact{Digest: string(a.Digest), Size: a.Size}
}
