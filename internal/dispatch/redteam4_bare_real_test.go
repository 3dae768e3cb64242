package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// TestRedTeam4_CodexWorkdirInABareLookingDirectory (a hostile repository):
// the repository commits a directory that looks like a bare git repository (sub/HEAD,
// sub/objects/, sub/refs/, and sub/config naming a core.fsmonitor command and core.worktree
// ..). The model runs the granted `git status` with Codex's workdir set to it: git took sub
// for a repository, read that config and ran the command, audited as git status allowed (the
// gate does not judge workdir). The sandbox's git now refuses a repository it finds only by
// its look (safe.bareRepository=explicit, from the agent's environment), so nothing runs.
//
// Failed before: pwned.txt was in the patch.
func TestRedTeam4_CodexWorkdirInABareLookingDirectory(t *testing.T) {
	h := newCodexGateHome(t)
	h.repo = gitRepo(t, map[string]string{
		"README.md":              "# repo\n",
		"sub/HEAD":               "ref: refs/heads/main\n",
		"sub/objects/info/.keep": "",
		"sub/refs/heads/.keep":   "",
		"sub/config":             "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"echo FSMONITOR-RAN > /agora/workspace/pwned.txt; false\"\n",
	})
	o := h.run("status-only", responsestest.Reply{Calls: []responsestest.Call{{Name: "exec_command", Arguments: `{"cmd":"git status","workdir":"sub"}`}}},
		responsestest.Say("done"))
	if strings.Contains(o.patch, "FSMONITOR-RAN") {
		t.Errorf("git status in sub ran the fsmonitor its config names (dispatch %s %s):\n%s", o.id, o.rec.State, o.patch)
	}
	if got := o.decisions(); len(got) != 1 || got[0] != "exec_command allowed" {
		t.Errorf("tool.call entries of %s: %q, want the granted git status allowed", o.id, got)
	}
	transcript := h.agora("dispatch", "logs", o.id, "--transcript")
	if !strings.Contains(transcript, "safe.bareRepository") {
		t.Errorf("git did not refuse the bare-looking directory; transcript:\n%.3000s", transcript)
	}
}
