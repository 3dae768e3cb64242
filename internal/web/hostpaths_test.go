package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch/api"
)

func TestHideHostPaths(t *testing.T) {
	in := map[string]any{
		"repo": "/home/alice/src/app", "revision": "abc", "workspace": "app@sha256:1",
		"runtime_binary": map[string]any{"path": "/opt/agora/claude", "host_path": "/usr/local/bin/claude"},
		"list":           []any{map[string]any{"repo": "/srv/x"}, "plain"},
		"empty":          map[string]any{"repo": ""},
	}
	out, _ := json.Marshal(hideHostPaths(in))
	for _, leaked := range []string{"/home/alice", "/usr/local/bin", "/srv/x"} {
		if strings.Contains(string(out), leaked) {
			t.Errorf("%s still in %s", leaked, out)
		}
	}
	for _, kept := range []string{`"revision":"abc"`, `"path":"/opt/agora/claude"`, `"plain"`, `"empty":{"repo":""}`} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("%s lost from %s", kept, out)
		}
	}
	if in["repo"] != "/home/alice/src/app" {
		t.Error("the input was changed")
	}
	r := runForViewer(api.Run{Repo: "/src/app"}, false)
	rec := recordForViewer(&dispatch.Record{Repo: "/src/app"}, false)
	if r.Repo != hiddenPath || rec.Repo != hiddenPath {
		t.Errorf("viewer sees run repo %q, dispatch repo %q", r.Repo, rec.Repo)
	}
	if runForViewer(api.Run{Repo: "/src/app"}, true).Repo != "/src/app" {
		t.Error("an operator does not see the repository")
	}
}
