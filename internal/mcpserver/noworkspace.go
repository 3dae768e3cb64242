package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// instructions is what the server tells a client at initialize. Workspaces are in it because
// an agent reaches code only through one: a lead that leaves the workspace out dispatches an
// agent into an empty directory, where the first file it opens is missing (a Python agent's
// bare FileNotFoundError).
const instructions = "agora dispatches sandboxed sub-agents from a catalog that people provision. " +
	"List what exists with agora_subagents_list and agora_envs_list, then run one with agora_dispatch. " +
	"An agent works on code only through a workspace: a git repository a person registered on the host " +
	"(agora workspace register NAME --repo PATH), named by agora_dispatch's workspace argument (its description lists " +
	"the registered ones and the revisions each allows; revision picks one) or by a plan's top-level workspace. " +
	"The agent then starts in a checkout of that commit and its changes come back as a patch. " +
	"Without a workspace the agent starts in an empty directory: no repository files to read."

// noWorkspaceNote explains a dispatch that ran without a workspace and failed: it started in
// an empty directory, which is the likely cause, and the note says how to give it code. ""
// when the dispatch had a workspace or did not fail in its agent.
func (s *Server) noWorkspaceNote(ctx context.Context, r *Record) string {
	if r.Workspace != "" || r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonWorkerFailed {
		return ""
	}
	known := "none is registered: a person registers one with agora workspace register NAME --repo PATH"
	if vs, err := s.cfg.Catalog.List(ctx, catalog.KindWorkspace); err == nil && len(vs) > 0 {
		names := make([]string, 0, min(len(vs), 20))
		for _, v := range vs[:min(len(vs), 20)] {
			names = append(names, v.Name)
		}
		known = "registered: " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("it ran without a workspace, so the agent started in an empty directory with no repository files "+
		"(a file it expected is missing: FileNotFoundError, No such file or directory); to work on code, dispatch again with "+
		"\"workspace\": NAME (%s)", known)
}
