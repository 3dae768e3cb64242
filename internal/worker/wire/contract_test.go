package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/lifecycle"

	"github.com/agora-dev/agora/internal/grant"
)

func validManifest() Manifest {
	d := digest.Sum([]byte("cap"))
	return Manifest{
		Version:             ManifestVersion,
		DispatchID:          "01JABCDEF",
		Subagent:            Bundle{Name: "fixer", Digest: digest.Sum([]byte("doc")), Path: SubagentFile},
		Capabilities:        []Bundle{{Name: "repo-tools", Digest: d, Path: CapabilityPath(d)}},
		Runtime:             "exec",
		Command:             []string{"sh", "-c", "true"},
		Grants:              Grants{Commands: []string{"sh -c *"}, Tools: []string{"read_file"}, Egress: grant.MustEgressRules("api.example.com")},
		InputJSON:           `{"k":1}`,
		Env:                 map[string]string{"GREETING": "hi"},
		SecretKeys:          []string{"TOKEN"},
		AgentTimeoutSeconds: 1800,
		SetupTimeoutSeconds: 120,
	}
}

func TestManifest_MarshalParseRoundTrip(t *testing.T) {
	m := validManifest()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if want := 30*time.Minute + 2*time.Minute + CaptureMargin; m.WallClock() != want {
		t.Errorf("WallClock = %v, want %v", m.WallClock(), want)
	}
}

func TestParseManifest_Refuses(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(m *Manifest)
		detail string
	}{
		{"version", func(m *Manifest) { m.Version = 2 }, "unsupported version 2"},
		{"dispatch id", func(m *Manifest) { m.DispatchID = "../x" }, "dispatch_id"},
		{"subagent path", func(m *Manifest) { m.Subagent.Path = "../subagent.json" }, "subagent: path"},
		{"capability path", func(m *Manifest) { m.Capabilities[0].Path = "capabilities/x.tar" }, "capabilities[0]: path"},
		{"capability digest", func(m *Manifest) { m.Capabilities[0].Digest = "sha256:XYZ" }, "capabilities[0]"},
		{"capability name", func(m *Manifest) { m.Capabilities[0].Name = "Bad Name" }, "invalid capability name"},
		{"runtime", func(m *Manifest) { m.Runtime = "python" }, "runtime: want one of"},
		{"exec without command", func(m *Manifest) { m.Command = nil }, "needs a command"},
		{"NUL in command", func(m *Manifest) { m.Command = []string{"sh\x00"} }, "NUL"},
		{"bad command pattern", func(m *Manifest) { m.Grants.Commands = []string{"* **"} }, "grants.commands[0]"},
		{"input not JSON", func(m *Manifest) { m.InputJSON = "{" }, "input_json: not valid JSON"},
		{"input too large", func(m *Manifest) { m.InputJSON = `"` + strings.Repeat("a", MaxInputJSON) + `"` }, "input_json"},
		{"AGORA_ env key", func(m *Manifest) { m.Env["AGORA_OUT"] = "/" }, "reserved"},
		{"bad env key", func(m *Manifest) { m.Env["A=B"] = "x" }, "invalid key"},
		{"NUL in env value", func(m *Manifest) { m.Env["X"] = "a\x00" }, "NUL"},
		{"AGORA_ secret key", func(m *Manifest) { m.SecretKeys = []string{"agora_token"} }, "reserved"},
		{"duplicate secret key", func(m *Manifest) { m.SecretKeys = []string{"T", "T"} }, "listed twice"},
		{"agent timeout zero", func(m *Manifest) { m.AgentTimeoutSeconds = 0 }, "agent_timeout_seconds"},
		{"agent timeout too long", func(m *Manifest) { m.AgentTimeoutSeconds = MaxAgentTimeoutSeconds + 1 }, "agent_timeout_seconds"},
		{"setup timeout zero", func(m *Manifest) { m.SetupTimeoutSeconds = 0 }, "setup_timeout_seconds"},
		{"base patch outside the inputs", func(m *Manifest) { m.BasePatch = "../../etc/patch.diff" }, "base_patch"},
		{"base patch not a patch file", func(m *Manifest) { m.BasePatch = "patch/outputs.tar" }, "base_patch"},
		{"base patch under a bad key", func(m *Manifest) { m.BasePatch = "Patch/patch.diff" }, "base_patch"},
		{"base patch deeper", func(m *Manifest) { m.BasePatch = "patch/x/patch.diff" }, "base_patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validManifest()
			tt.edit(&m)
			if _, err := m.Marshal(); err == nil || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("Marshal: got %v, want an error with %q", err, tt.detail)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseManifest(b); err == nil || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("ParseManifest: got %v, want an error with %q", err, tt.detail)
			}
		})
	}
}

func TestParseManifest_RefusesBytes(t *testing.T) {
	good, err := validManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, detail string }{
		{"unknown field", strings.Replace(string(good), `{"version":1,`, `{"version":1,"image":"evil",`, 1), `unknown field "image"`},
		{"duplicate key", strings.Replace(string(good), `{"version":1,`, `{"version":1,"version":1,`, 1), "duplicate key"},
		{"trailing data", string(good) + "{}", "data after"},
		{"invalid UTF-8", strings.Replace(string(good), `"hi"`, "\"\xff\"", 1), "UTF-8"},
		{"too large", string(good) + strings.Repeat(" ", MaxManifestSize), "limit"},
		{"deep nesting", strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested deeper"},
		{"not an object", `[]`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseManifest([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("got %v, want an error with %q", err, tt.detail)
			}
		})
	}
}

func validResult() Result {
	return Result{
		Version:  ResultVersion,
		Status:   StatusNeedsInput,
		ExitCode: 1,
		Phases:   []Phase{{Name: PhaseVerify, OK: true, MS: 3}, {Name: PhaseRuntime, OK: true, MS: 10}, {Name: PhaseCapture, OK: true}},
		Patch:    &PatchInfo{Path: PatchFile, SHA256: strings.Repeat("ab", 32), Bytes: 123, FilesChanged: 1},
		Outputs: []OutputInfo{
			{Path: "outputs/a.md", Size: 10, SHA256: strings.Repeat("01", 32)},
			{Path: "outputs/b/c.bin", Size: 0, SHA256: strings.Repeat("02", 32)},
		},
		OutputsSkipped: []SkippedOutput{{Path: "outputs/link", Why: SkipSymlink}},
		NeedsInput:     &NeedsInput{Question: "which?", Options: []string{"a"}, PartialState: json.RawMessage(`{"s":1}`)},
		Final:          &FileInfo{Path: FinalPath, Size: 10, SHA256: strings.Repeat("01", 32)},
	}
}

func TestResult_MarshalParseRoundTrip(t *testing.T) {
	r := validResult()
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// Lists are [] in JSON, never null.
	b, err = Result{Version: ResultVersion, Status: StatusFailed, Reason: lifecycle.ReasonDenied}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"phases":[]`, `"outputs":[]`, `"outputs_skipped":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	// A result without a final (an exec agent's, or one written before the field existed)
	// says nothing about it: the key is absent, and such a result still parses.
	if strings.Contains(string(b), `"final"`) {
		t.Errorf("%s has a final key", b)
	}
	if got, err := ParseResult(b); err != nil || got.Final != nil {
		t.Errorf("a result without final: %+v, %v", got.Final, err)
	}
}

func TestParseResult_Refuses(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(r *Result)
		detail string
	}{
		{"version", func(r *Result) { r.Version = 0 }, "unsupported version"},
		{"unknown status", func(r *Result) { r.Status = "done" }, "unknown status"},
		{"unknown reason", func(r *Result) { r.Status, r.Reason, r.NeedsInput = StatusFailed, "oops", nil }, "unknown reason"},
		{"host-only reason", func(r *Result) { r.Status, r.Reason, r.NeedsInput = StatusFailed, "cancelled", nil }, "unknown reason"},
		{"failed without reason", func(r *Result) { r.Status, r.NeedsInput = StatusFailed, nil }, "no reason"},
		{"ok with reason", func(r *Result) {
			r.Status, r.Reason, r.NeedsInput, r.ExitCode = StatusOK, lifecycle.ReasonTimeout, nil, 0
		}, "want no reason"},
		{"ok with exit code", func(r *Result) { r.Status, r.NeedsInput = StatusOK, nil }, "exit code 0"},
		{"needs_input without question", func(r *Result) { r.NeedsInput = nil }, "no needs_input"},
		{"question on a failure", func(r *Result) { r.Status, r.Reason = StatusFailed, lifecycle.ReasonWorkerFailed }, "present with status"},
		{"bad question", func(r *Result) { r.NeedsInput.Question = "" }, "question is required"},
		{"unknown phase", func(r *Result) { r.Phases[0].Name = "deploy" }, "unknown phase"},
		{"phases out of order", func(r *Result) { r.Phases[0], r.Phases[1] = r.Phases[1], r.Phases[0] }, "out of order"},
		{"negative ms", func(r *Result) { r.Phases[0].MS = -1 }, "negative"},
		{"patch path", func(r *Result) { r.Patch.Path = "../patch.diff" }, "patch.path"},
		{"patch sha", func(r *Result) { r.Patch.SHA256 = "AB" }, "patch.sha256"},
		{"patch too big", func(r *Result) { r.Patch.Bytes = MaxPatchSize + 1 }, "patch.bytes"},
		{"files changed impossible", func(r *Result) { r.Patch.FilesChanged = 1000 }, "impossible"},
		{"output outside", func(r *Result) { r.Outputs[0].Path = "outputs/../result.json" }, "not clean"},
		{"output not under outputs", func(r *Result) { r.Outputs[0].Path = "patch.diff" }, "want outputs/"},
		{"output control char", func(r *Result) { r.Outputs[0].Path = "outputs/a\nb" }, "unprintable"},
		{"outputs unsorted", func(r *Result) { r.Outputs[0], r.Outputs[1] = r.Outputs[1], r.Outputs[0] }, "out of order"},
		{"outputs too large", func(r *Result) { r.Outputs[0].Size = MaxOutputsSize; r.Outputs[1].Size = 1 }, "in all"},
		{"skipped reason", func(r *Result) { r.OutputsSkipped[0].Why = "because" }, "unknown reason"},
		{"detail too long", func(r *Result) { r.Detail = strings.Repeat("d", MaxDetail+1) }, "detail"},
		{"final elsewhere", func(r *Result) { r.Final.Path = "outputs/verdict.json" }, "final.path"},
		{"final outside outputs", func(r *Result) { r.Final.Path = FinalFile }, "final.path"},
		{"final size", func(r *Result) { r.Final.Size = -1 }, "final.size"},
		{"final too large", func(r *Result) { r.Final.Size = MaxOutputsSize + 1 }, "final.size"},
		{"final sha", func(r *Result) { r.Final.SHA256 = strings.Repeat("AB", 32) }, "final.sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validResult()
			tt.edit(&r)
			if _, err := r.Marshal(); err == nil || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("Marshal: got %v, want an error with %q", err, tt.detail)
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseResult(b); err == nil || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("ParseResult: got %v, want an error with %q", err, tt.detail)
			}
		})
	}
}

func TestParseResult_RefusesBytes(t *testing.T) {
	good, err := validResult().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, detail string }{
		{"unknown field", strings.Replace(string(good), `{"version":1,`, `{"version":1,"signed":true,`, 1), `unknown field "signed"`},
		{"duplicate status", strings.Replace(string(good), `"status":"needs_input",`, `"status":"failed","status":"needs_input",`, 1), "duplicate key"},
		{"too large", string(good) + strings.Repeat(" ", MaxResultSize), "limit"},
		{"float exit code", strings.Replace(string(good), `"exit_code":1`, `"exit_code":1.5`, 1), "exit_code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseResult([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("got %v, want an error with %q", err, tt.detail)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	good, _ := validManifest().Marshal()
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"version":2}`))
	f.Add([]byte(`[[[[[[]]]]]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		// Whatever parses is valid, and survives a round trip unchanged.
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("parsed manifest does not marshal: %v", err)
		}
		again, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("marshalled manifest does not parse: %v", err)
		}
		if out2, err := again.Marshal(); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s (%v)", out, out2, err)
		}
	})
}

func FuzzParseResult(f *testing.F) {
	good, _ := validResult().Marshal()
	f.Add(good)
	ok, _ := Result{Version: 1, Status: StatusOK}.Marshal()
	f.Add(ok)
	f.Add([]byte(`{"version":1,"status":"failed","reason":"timeout","exit_code":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResult(b)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("parsed result does not validate: %v", err)
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatalf("parsed result does not marshal: %v", err)
		}
		if _, err := ParseResult(out); err != nil {
			t.Fatalf("marshalled result does not parse: %v", err)
		}
	})
}

func FuzzParseNeedsInput(f *testing.F) {
	f.Add([]byte(`{"question":"q","options":["a"],"partial_state":{"x":[1,2]}}`))
	f.Add([]byte(`{"question":"q","partial_state":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseNeedsInput(b)
		if err != nil {
			return
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("parsed question does not validate: %v", err)
		}
		// It must fit in a result as is.
		if _, err := (Result{Version: 1, Status: StatusNeedsInput, NeedsInput: &n}).Marshal(); err != nil {
			t.Fatalf("parsed question does not fit a result: %v", err)
		}
	})
}
