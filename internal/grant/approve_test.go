package grant

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestApproveRule_JSON(t *testing.T) {
	tests := []struct {
		name, in string
		want     ApproveRule
		out      string
		wantErr  string
	}{
		{name: "tool", in: `"write_file"`, want: ApproveRule{Tool: "write_file"}, out: `"write_file"`},
		{name: "command", in: `{"command":"git push *"}`, want: ApproveRule{Command: "git push *"}, out: `{"command":"git push *"}`},
		{name: "tool object", in: `{"tool":"run_command"}`, want: ApproveRule{Tool: "run_command"}, out: `"run_command"`},
		{name: "unknown tool", in: `"rm_rf"`, wantErr: `unknown tool "rm_rf"`},
		{name: "both keys", in: `{"command":"git push *","tool":"write_file"}`, wantErr: "exactly one key"},
		{name: "key twice", in: `{"command":"git *","command":"ls"}`, wantErr: "exactly one key"},
		{name: "key case", in: `{"Command":"git push *"}`, wantErr: "exactly one key"},
		{name: "bad pattern", in: `{"command":"* **"}`, wantErr: "approve rule"},
		{name: "empty", in: `""`, wantErr: "empty"},
		{name: "not a string value", in: `{"command":["git"]}`, wantErr: "exactly one key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r ApproveRule
			err := json.Unmarshal([]byte(tt.in), &r)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r != tt.want {
				t.Fatalf("got %+v, want %+v", r, tt.want)
			}
			b, _ := json.Marshal(r)
			if string(b) != tt.out {
				t.Fatalf("marshal: got %s, want %s", b, tt.out)
			}
		})
	}
}

func TestNeedsApproval(t *testing.T) {
	rules := []ApproveRule{{Tool: "write_file"}, {Command: "git push *"}}
	tests := []struct {
		tool string
		argv []string
		want bool
	}{
		{"write_file", nil, true},
		{"read_file", nil, false},
		{"run_command", []string{"git", "push", "origin"}, true},
		{"run_command", []string{"git", "push"}, true}, // a bare push pushes: * is no constraint in a rule
		{"run_command", []string{"git", "status", "x"}, false},
		{"http_fetch", []string{"git", "push", "origin"}, false},
	}
	for _, tt := range tests {
		if _, got := NeedsApproval(rules, tt.tool, tt.argv); got != tt.want {
			t.Errorf("NeedsApproval(%s %v) = %v, want %v", tt.tool, tt.argv, got, tt.want)
		}
	}
}

// Narrowing may add approvals, never drop one: the attack is a dispatch that asks for the
// parent's grant without its approve rules, to run a held call unheld.
func TestSet_NarrowKeepsApprovals(t *testing.T) {
	parent := Set{Tools: []string{"write_file", "run_command"}, Commands: []string{"git **"},
		Approve: []ApproveRule{{Tool: "write_file"}}}
	got, err := parent.Narrow(Set{Tools: []string{"write_file", "run_command"}, Commands: []string{"git **"},
		Approve: []ApproveRule{{Command: "git  push *"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []ApproveRule{{Command: "git push *"}, {Tool: "write_file"}}
	if diff := cmp.Diff(want, got.Approve); diff != "" {
		t.Fatalf("approve (-want +got):\n%s", diff)
	}
	// A child with no approve rules (nil or empty) keeps the parent's.
	for _, child := range []Set{{Tools: []string{"write_file"}}, {Tools: []string{"write_file"}, Approve: []ApproveRule{}}} {
		got, err := parent.Narrow(child)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ApproveRule{{Tool: "write_file"}}, got.Approve); diff != "" {
			t.Fatalf("approve (-want +got):\n%s", diff)
		}
	}
	if _, err := parent.Narrow(Set{Approve: []ApproveRule{{Tool: "nope"}}}); err == nil || !strings.Contains(err.Error(), "approve rule") {
		t.Fatalf("invalid child approve rule: got %v", err)
	}
}

// A grant without approvals marshals exactly as before the key existed, so records and plan
// digests keep their bytes.
func TestSet_JSONWithoutApprove(t *testing.T) {
	s, err := Set{Tools: []string{"read_file"}}.Narrow(Set{Tools: []string{"read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if want := `{"tools":["read_file"],"commands":[],"egress":[]}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	s.Approve = []ApproveRule{{Tool: "read_file"}}
	b, _ = json.Marshal(s)
	if want := `{"tools":["read_file"],"commands":[],"egress":[],"approve":["read_file"]}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

// FuzzApproveRule decodes arbitrary JSON as a rule: it must never panic, and a rule it
// accepts is valid and reads back the same after a round trip.
func FuzzApproveRule(f *testing.F) {
	for _, s := range []string{`"write_file"`, `{"command":"git push *"}`, `{"tool":"x"}`, `{"command":"a","command":"b"}`, `[]`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r ApproveRule
		if err := json.Unmarshal(b, &r); err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid rule %+v: %v", r, err)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back ApproveRule
		if err := json.Unmarshal(out, &back); err != nil || back != r {
			t.Fatalf("round trip: %s -> %+v, %v", out, back, err)
		}
	})
}
