package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// FuzzParseRun: any command line after `dispatch run` (NUL-separated here) is read without a
// panic, and what the front would hand off is well formed: a subagent, an absolute repository
// or none, a non-negative timeout, an output of json or none, an input that is JSON, and a
// request serve's own decoder accepts.
func FuzzParseRun(f *testing.F) {
	for _, s := range []string{
		"--subagent\x00x",
		"--subagent=x\x00--env\x00a, b,,c\x00--input\x00{\"a\":1}\x00--repo\x00/r@v1\x00--timeout\x001m\x00-o\x00json\x00--detach",
		"--subagent\x00x\x00--workspace\x00w@sha256:ab",
		"--subagent\x00x\x00--repo\x00.",
		"--subagent\x00x\x00--subagent\x00y",
		"-o",
		"--=x",
		"--subagent\x00x\xff\x00--repo\x00/r\xe9po",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := parseRun(strings.Split(s, "\x00"))
		if !ok {
			return
		}
		if r.subagent == "" || (r.repo != "" && !filepath.IsAbs(r.repo)) || r.timeout < 0 || (r.output != "" && r.output != "json") ||
			(r.input != "" && !json.Valid([]byte(r.input))) || (r.repo != "" && r.workspace != "") {
			t.Fatalf("parseRun(%q) = %+v", s, r)
		}
		hr := api.HandoffRequest{Home: "/h", Exe: "/e", Env: "e", Subagent: r.subagent, Envs: r.envs, Target: r.target,
			Repo: r.repo, Workspace: r.workspace, Revision: r.rev, TimeoutNS: int64(r.timeout), Output: r.output}
		if r.input != "" {
			hr.Input = json.RawMessage(r.input)
		}
		b, err := json.Marshal(hr)
		if err != nil {
			t.Fatalf("parseRun(%q): the request does not encode: %v", s, err)
		}
		got, err := api.DecodeHandoffRequest(b)
		if err != nil {
			t.Fatalf("parseRun(%q): serve would refuse the request: %v\n%s", s, err, b)
		}
		// serve reads what was typed, unchanged (JSON carries a value that is
		// not UTF-8 as U+FFFD, another name or path).
		if got.Subagent != hr.Subagent || got.Target != hr.Target || got.Repo != hr.Repo || got.Workspace != hr.Workspace ||
			got.Revision != hr.Revision || strings.Join(got.Envs, "\x00") != strings.Join(hr.Envs, "\x00") {
			t.Fatalf("parseRun(%q): serve reads %+v, not %+v", s, got, hr)
		}
	})
}
