package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/orch/api"
)

// FuzzEncodeRequest: the front's request is json.Marshal's, byte for byte, for any value of
// every field the front sets (strings that are not UTF-8, control characters, HTML
// characters, U+2028, any JSON input), so serve reads exactly what agora-full would send.
func FuzzEncodeRequest(f *testing.F) {
	f.Add("/home/a", "/usr/bin/agora-full", "ab12", "x@sha256:ab", "a, b", "t", `{ "b": [1, 2.50, "\u00e9<&>"], "a": {} }`,
		"/r", "app", "v1", "https://h/cb?a=1&b=<2>", "json", int64(90e9), int64(1), true, false, true)
	f.Add("\xff\x00\u2028\"\\\n\r\t\b\f\x7f", "", "", "", "", "", "", "", "", "", "", "", int64(-1), int64(0), false, true, false)
	f.Fuzz(func(t *testing.T, home, exe, env, subagent, envs, target, input, repo, ws, rev, callback, output string,
		timeout, startBy int64, learn, detach, progress bool) {
		r := api.HandoffRequest{
			Home: home, Exe: exe, Env: env, StartBy: startBy, Subagent: subagent, Target: target, Repo: repo,
			Workspace: ws, Revision: rev, TimeoutNS: timeout, Callback: callback, Learn: learn, Detach: detach,
			Output: output, Progress: progress,
			// The proof fields from the others: the corpus keeps its shape.
			ProofFD: int(uint16(startBy)), Proof: rev,
		}
		if envs != "" {
			r.Envs = strings.Split(envs, ",")
		}
		if input != "" {
			r.Input = json.RawMessage(input)
		}
		want, werr := json.Marshal(r)
		got, err := encodeRequest(&r)
		if (err != nil) != (werr != nil) {
			t.Fatalf("encodeRequest: %v; json.Marshal: %v", err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("encodeRequest wrote\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// TestEncodeRequest_NotTheFronts: a request with grants, a verify spec or a budget is refused,
// never sent without them.
func TestEncodeRequest_NotTheFronts(t *testing.T) {
	for _, r := range []api.HandoffRequest{
		{Grants: json.RawMessage(`{}`)},
		{Budget: budget.Budget{Tokens: 1}},
	} {
		if b, err := encodeRequest(&r); err == nil {
			t.Errorf("encoded %s", b)
		}
	}
}

// TestEncodeRequest_EnvSums: the sums of the front's environment are encoded as
// json.Marshal encodes them, so a taker that declines names the variables that differ.
func TestEncodeRequest_EnvSums(t *testing.T) {
	r := api.HandoffRequest{Home: "/h", Exe: "/e", Env: "d", EnvAll: "a", Subagent: "s",
		EnvSums: api.EnvSums([]string{"PATH=/usr/bin", "A<B>&=\u2028", "TERM=xterm", "\xff=1"})}
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeRequest(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("encodeRequest wrote\n%s\njson.Marshal\n%s", got, want)
	}
	if _, err := api.DecodeHandoffRequest(got); err != nil {
		t.Errorf("serve refuses the front's request: %v", err)
	}
}
