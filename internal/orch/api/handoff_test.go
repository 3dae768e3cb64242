package api

import (
	"slices"
	"strings"
	"testing"
)

const okHandoff = `{"home":"/h","exe":"/bin/agora","env":"e","subagent":"noop","budget":{}}`

// TestDecodeHandoffRequest_Exact: the request is read exactly: an actor (which serve takes
// from the peer's credentials, never the client), a case-folded or duplicated key, a relative
// repository, a malformed input and an oversized body are refused with a clear error.
func TestDecodeHandoffRequest_Exact(t *testing.T) {
	if _, err := DecodeHandoffRequest([]byte(okHandoff)); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	for name, c := range map[string]struct{ body, want string }{
		"forged actor":   {`{"home":"/h","exe":"/e","env":"e","subagent":"s","actor":"root"}`, "actor"},
		"case folded":    {`{"home":"/h","exe":"/e","env":"e","Subagent":"s"}`, "Subagent"},
		"duplicate key":  {`{"home":"/h","exe":"/e","env":"e","subagent":"s","subagent":"t"}`, "subagent"},
		"no subagent":    {`{"home":"/h","exe":"/e","env":"e"}`, "subagent is required"},
		"no home":        {`{"exe":"/e","env":"e","subagent":"s"}`, "home, exe and env"},
		"no env":         {`{"home":"/h","exe":"/e","subagent":"s"}`, "home, exe and env"},
		"relative repo":  {`{"home":"/h","exe":"/e","env":"e","subagent":"s","repo":"."}`, "not absolute"},
		"bad input":      {`{"home":"/h","exe":"/e","env":"e","subagent":"s","input":{"a":1,"A":2}}`, "input"},
		"grants a list":  {`{"home":"/h","exe":"/e","env":"e","subagent":"s","grants":[]}`, "grants"},
		"negative":       {`{"home":"/h","exe":"/e","env":"e","subagent":"s","timeout_ns":-1}`, "negative"},
		"bad output":     {`{"home":"/h","exe":"/e","env":"e","subagent":"s","output":"yaml"}`, "output"},
		"two values":     {okHandoff + okHandoff, ""},
		"huge":           {`{"home":"/h","exe":"/e","env":"e","subagent":"s","input":"` + strings.Repeat("a", MaxHandoffRequest) + `"}`, "limit"},
		"not an object":  {`[]`, ""},
		"learn a string": {`{"home":"/h","exe":"/e","env":"e","subagent":"s","learn":"yes"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeHandoffRequest([]byte(c.body))
			if err == nil {
				t.Fatalf("accepted %.80s", c.body)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
		})
	}
}

// TestDecodeHandoffFrame_OneField: a frame carries exactly one thing.
func TestDecodeHandoffFrame_OneField(t *testing.T) {
	for _, ok := range []string{`{"out":"x\n"}`, `{"end":{"exit":3}}`, `{"handle":"ab"}`} {
		if _, err := DecodeHandoffFrame([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`{}`, `{"out":"a","err":"b"}`, `{"end":{"exit":256}}`, `{"end":{"exit":-1}}`, `{"Out":"a"}`, `{"out":"a","more":1}`} {
		if _, err := DecodeHandoffFrame([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzDecodeHandoffRequest: no input panics the hand-off parser, and what it accepts is a
// request serve can act on (home, exe and subagent set, an absolute repository or none).
func FuzzDecodeHandoffRequest(f *testing.F) {
	f.Add([]byte(okHandoff))
	f.Add([]byte(`{"home":"/h","exe":"/e","env":"e","subagent":"s","repo":"/r","input":{"a":[1,2]},"grants":{"tools":[]},"learn":true,"detach":true,"output":"json","timeout_ns":5}`))
	f.Add([]byte(`{"home":"/h","exe":"/e","env":"e","subagent":"s","actor":"root"}`))
	f.Add([]byte(`{"home":"/h","exe":"/e","env":"e","subagent":"s","verify":{"command":"true"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHandoffRequest(b)
		if err != nil {
			return
		}
		if r.Home == "" || r.Exe == "" || r.Env == "" || r.Subagent == "" || r.TimeoutNS < 0 || (r.Repo != "" && r.Repo[0] != '/') {
			t.Fatalf("accepted an unusable request: %+v", r)
		}
	})
}

// FuzzDecodeHandoffFrame: no input panics the CLI's frame reader, and an accepted frame has
// one field set.
func FuzzDecodeHandoffFrame(f *testing.F) {
	f.Add([]byte(`{"err":"agora: x accepted\n"}`))
	f.Add([]byte(`{"end":{"exit":130,"error":"cancelled","interrupted":true}}`))
	f.Add([]byte(`{"id":"01M86S31ZMCFQDHC9NHHG62VFE"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeHandoffFrame(b)
		if err != nil {
			return
		}
		if fr.End != nil && (fr.End.Exit < 0 || fr.End.Exit > 255) {
			t.Fatalf("exit %d accepted", fr.End.Exit)
		}
	})
}

// TestEnvDigest_WhatADispatchReads: the digest changes with PATH, DOCKER_HOST,
// AGORA_WORKER_BINARY and OTEL_*, not with the order of the environment or other variables.
func TestEnvDigest_WhatADispatchReads(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/root", "OTEL_SERVICE_NAME=a"}
	d := EnvDigest(base)
	if EnvDigest([]string{"OTEL_SERVICE_NAME=a", "TERM=x", "PATH=/usr/bin"}) != d {
		t.Error("order or an unread variable changed the digest")
	}
	for _, extra := range []string{"PATH=/opt/bin", "DOCKER_HOST=tcp://x", "AGORA_WORKER_BINARY=/w", "OTEL_EXPORTER_OTLP_ENDPOINT=http://x"} {
		if EnvDigest(append(slices.Clone(base)[:0:0], append([]string{extra}, base[1:]...)...)) == d {
			t.Errorf("%s did not change the digest", extra)
		}
	}
}
