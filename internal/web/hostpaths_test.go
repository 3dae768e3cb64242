package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/worker/wire"
)

func TestMasked(t *testing.T) {
	m := hostpath.New("/home/alice/src/app")
	in := map[string]any{
		"repo": "/home/alice/src/app", "revision": "abc", "workspace": "app@sha256:1",
		"runtime_binary": map[string]any{"path": "/opt/agora/claude", "host_path": "/usr/local/bin/claude"},
		"list":           []any{map[string]any{"repo": "/srv/x"}, "plain"},
		"empty":          map[string]any{"repo": ""},
		"reason":         "checkout /var/tmp/other/repo: exit status 128",
	}
	out, _ := json.Marshal(masked(any(in), m))
	for _, leaked := range []string{"/home/alice", "/usr/local/bin", "/srv/x", "/var/tmp", "/opt/agora"} {
		if strings.Contains(string(out), leaked) {
			t.Errorf("%s still in %s", leaked, out)
		}
	}
	for _, kept := range []string{`"revision":"abc"`, `"plain"`, `"empty":{"repo":""}`} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("%s lost from %s", kept, out)
		}
	}
	if in["repo"] != "/home/alice/src/app" {
		t.Error("the input was changed")
	}
	run := api.Run{Repo: "/src/app", Tasks: []api.Task{{ID: "a", Detail: "repository /x/y is gone", Question: "see /work/out.txt in /src/app/x"}}}
	r := masked(run, hostpath.New("/src/app"))
	if r.Repo != hiddenPath || r.Tasks[0].Detail != "repository (host path hidden) is gone" || r.Tasks[0].Question != "see /work/out.txt in (host path hidden)" {
		t.Errorf("masked run %+v", r)
	}
	if run.Repo != "/src/app" || run.Tasks[0].Detail != "repository /x/y is gone" {
		t.Error("the run was changed")
	}
	rec := &dispatch.Record{Repo: "/src/app", RuntimeBinary: &wire.RuntimeBinary{HostPath: "/usr/bin/claude"}, Detail: "x /tmp/a/b"}
	got := masked(rec, hostpath.New("/src/app"))
	if got.Repo != hiddenPath || got.RuntimeBinary.HostPath != hiddenPath || got.Detail != "x (host path hidden)" || rec.RuntimeBinary.HostPath != "/usr/bin/claude" {
		t.Errorf("masked record %+v %+v", got, got.RuntimeBinary)
	}
	if masked(run, nil).Repo != "/src/app" {
		t.Error("an operator (nil mask) does not see the repository")
	}
}
