package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
)

var capFiles = []catalog.File{
	regular("bin/setup.sh", 0o755, "#!/bin/sh\n"),
	{Path: "bin/setup-link", Mode: 0o777, LinkTarget: "setup.sh"},
	regular("capability.yaml", 0o644, ""),
}

func TestParseCapabilityDoc_Valid(t *testing.T) {
	src := `description: tools for the repo
tools: [read_file, run_command, http_fetch]
commands:
  - go test **
  - git status
  - make *
egress: [api.github.com, "*.example.com", localhost]
setup: bin/setup.sh
network: egress
`
	got, err := catalog.ParseCapabilityDoc("cap/capability.yaml", []byte(src), capFiles)
	if err != nil {
		t.Fatalf("ParseCapabilityDoc: %v", err)
	}
	want := catalog.CapabilityDoc{
		Description: "tools for the repo",
		Set: grant.Set{
			Tools:    []string{"read_file", "run_command", "http_fetch"},
			Commands: []string{"go test **", "git status", "make *"},
			Egress:   grant.MustEgressRules("api.github.com", "*.example.com", "localhost"),
		},
		Setup:   "bin/setup.sh",
		Network: "egress",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseCapabilityDoc mismatch (-want +got):\n%s", diff)
	}
}

func TestParseCapabilityDoc_Defaults(t *testing.T) {
	for _, src := range []string{"", "# nothing granted\n", "tools: []\n", "network: none\n"} {
		got, err := catalog.ParseCapabilityDoc("capability.yaml", []byte(src), nil)
		if err != nil {
			t.Fatalf("ParseCapabilityDoc(%q): %v", src, err)
		}
		want := catalog.CapabilityDoc{Set: grant.Set{Tools: []string{}, Commands: []string{}, Egress: grant.MustEgressRules()}, Network: "none"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseCapabilityDoc(%q) mismatch (-want +got):\n%s", src, diff)
		}
		// Lists are [] in JSON, never null.
		if got.Tools == nil || got.Commands == nil || got.Egress == nil {
			t.Errorf("ParseCapabilityDoc(%q) left a nil list: %#v", src, got)
		}
	}
}

func TestParseCapabilityDoc_Errors(t *testing.T) {
	src := `tools: [read_file, rm_rf, read_file]
commands:
  - ""
  - "** x"
  - "* arg"
  - "go [bad"
  - ok fine
egress:
  - API.GITHUB.COM
  - https://example.com
  - good.example.com
  - "*"
  - bad_host.com
network: internet
setup: bin/missing.sh
`
	_, err := catalog.ParseCapabilityDoc("cap/capability.yaml", []byte(src), capFiles)
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("ParseCapabilityDoc = %v, want strictyaml.Errors", err)
	}
	known := strings.Join(grant.BuiltinTools, ", ")
	want := strictyaml.Errors{
		{File: "cap/capability.yaml", Line: 1, Path: "tools[1]", Msg: `unknown tool "rm_rf"; known tools: ` + known},
		{File: "cap/capability.yaml", Line: 1, Path: "tools[2]", Msg: `tool "read_file" listed twice`},
		{File: "cap/capability.yaml", Line: 3, Path: "commands[0]", Msg: "empty command pattern"},
		{File: "cap/capability.yaml", Line: 4, Path: "commands[1]", Msg: `command pattern "** x": ** may only be the last word`},
		{File: "cap/capability.yaml", Line: 5, Path: "commands[2]", Msg: `command pattern "* arg": the program must be named, not *`},
		{File: "cap/capability.yaml", Line: 6, Path: "commands[3]", Msg: `command pattern "go [bad": bad glob "[bad"`},
		{File: "cap/capability.yaml", Line: 10, Path: "egress[1]", Msg: `egress "https://example.com": write a host and optional port such as api.example.com:443, not a URL (paths go in a rule's paths)`},
		{File: "cap/capability.yaml", Line: 12, Path: "egress[3]", Msg: `egress host "*": want a lowercase host name such as api.example.com or *.example.com, or an IP address`},
		{File: "cap/capability.yaml", Line: 13, Path: "egress[4]", Msg: `egress host "bad_host.com": want a lowercase host name such as api.example.com or *.example.com, or an IP address`},
		{File: "cap/capability.yaml", Line: 14, Path: "network", Msg: `want "none" or "egress", got "internet"`},
		{File: "cap/capability.yaml", Line: 15, Path: "setup", Msg: `setup script "bin/missing.sh" is not a file in the capability`},
	}
	if diff := cmp.Diff(want, es); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
}

func TestParseCapabilityDoc_SetupSymlink(t *testing.T) {
	_, err := catalog.ParseCapabilityDoc("capability.yaml", []byte("setup: bin/setup-link\n"), capFiles)
	want := `capability.yaml:1: setup: setup script "bin/setup-link" is a symlink; name the file itself`
	if err == nil || err.Error() != want {
		t.Errorf("ParseCapabilityDoc = %v, want %q", err, want)
	}
}

func TestParseCapabilityDoc_DecodeErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unknown field", "tool: [read_file]\n", `capability.yaml:1: tool: unknown field "tool"; known fields: approve, commands, description, egress, network, overlay, setup, tools`},
		{"type mismatch", "tools: read_file\n", `capability.yaml:1: tools: want a list, got "read_file"`},
		{"egress as mapping", "egress: {a: b}\n", `capability.yaml:1: egress: want a list, got a mapping`},
		{"duplicate key", "network: none\nnetwork: egress\n", `capability.yaml:2: network: duplicate key (first at line 1)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := catalog.ParseCapabilityDoc("capability.yaml", []byte(tt.src), nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseCapabilityDoc = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseCapabilityDoc_TooLarge(t *testing.T) {
	src := "description: " + strings.Repeat("x", 256<<10) + "\n"
	if _, err := catalog.ParseCapabilityDoc("capability.yaml", []byte(src), nil); err == nil ||
		!strings.Contains(err.Error(), "capability.yaml is larger than 262144 bytes") {
		t.Errorf("ParseCapabilityDoc of an oversized file = %v", err)
	}
}

func TestParseCapabilityDoc_Approve(t *testing.T) {
	src := "tools: [write_file, run_command]\ncommands: [\"git **\"]\napprove: [write_file, {command: \"git push *\"}]\n"
	got, err := catalog.ParseCapabilityDoc("capability.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []grant.ApproveRule{{Tool: "write_file"}, {Command: "git push *"}}
	if diff := cmp.Diff(want, got.Approve); diff != "" {
		t.Errorf("approve (-want +got):\n%s", diff)
	}
	bad := "approve: [nope, {command: \"* **\"}, {tool: write_file, command: ls}, {verb: x}]\n"
	_, err = catalog.ParseCapabilityDoc("capability.yaml", []byte(bad), nil)
	for _, want := range []string{"approve[0]", `unknown tool "nope"`, "approve[1]", "approve[2]", "not both", "approve[3]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to name %q", err, want)
		}
	}
}
