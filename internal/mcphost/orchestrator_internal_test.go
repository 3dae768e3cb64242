package mcphost

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestWithoutPath_VerdictsAndReviews: a run's status over MCP hides host paths in a task's
// verdict (its detail, which the host wrote, its output tail and its verify cache's path) and in a reviewer's
// reasons, as agora_dispatch_describe does for a dispatch's verdict.
func TestWithoutPath_VerdictsAndReviews(t *testing.T) {
	const repo = "/srv/private/app"
	v := &verdict.Verdict{Detail: "verify: start the verify sandbox: mkdir /var/lib/agora/stage/01X/gate: no space left",
		OutputTail: "--- FAIL " + repo + "/x_test.go:3", Cache: "/var/lib/agora-verify/cache"}
	rv := &api.Review{Reasons: []string{"see " + repo + "/main.go"}}
	in := api.Run{Repo: repo, Tasks: []api.Task{{ID: "a", Verdict: v, Review: rv}}}
	out := withoutPath(in)
	got := out.Tasks[0]
	for _, s := range append([]string{got.Verdict.Detail, got.Verdict.OutputTail, got.Verdict.Cache}, got.Review.Reasons...) {
		if strings.Contains(s, "/var/lib/agora") || strings.Contains(s, repo) {
			t.Errorf("a host path shown over MCP: %q", s)
		}
	}
	if got.Verdict.Cache == "" {
		t.Error("the verdict's cache was dropped, not masked: a client cannot tell the gate used one")
	}
	if in.Tasks[0].Verdict.Detail != v.Detail || rv.Reasons[0] != "see "+repo+"/main.go" {
		t.Error("withoutPath changed the run it was given")
	}
}
