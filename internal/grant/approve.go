package grant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/cmdread"
)

// maxApproveRules caps a grant's approval rules, so matching a call stays cheap.
const maxApproveRules = 256

// ApproveRule marks calls a person must approve before they run. It names either a built-in
// tool (every call of it is held) or a command pattern ([ParseCommandPattern] syntax; a
// run_command call whose argv matches is held). Approval is on top of the grant: a call
// that is not granted is refused whatever the rules say.
//
// Written as the tool's name ("write_file") or as {command: "git push *"}; its JSON is the
// same (a string for a tool, an object for a command).
type ApproveRule struct {
	Tool    string `yaml:"tool" json:"tool,omitempty"`
	Command string `yaml:"command" json:"command,omitempty"`
}

// Validate checks that r names exactly one built-in tool or one command pattern.
func (r ApproveRule) Validate() error {
	switch {
	case r.Tool != "" && r.Command != "":
		return errors.New("approve rule: name a tool or a command, not both")
	case r.Tool != "":
		if !IsBuiltinTool(r.Tool) {
			return fmt.Errorf("approve rule: unknown tool %q; known tools: %s", r.Tool, strings.Join(BuiltinTools, ", "))
		}
	case r.Command != "":
		if _, err := ParseCommandPattern(r.Command); err != nil {
			return fmt.Errorf("approve rule: %w", err)
		}
	default:
		return errors.New("approve rule: empty; write a tool name or {command: PATTERN}")
	}
	return nil
}

// String is the rule as a person reads it: the tool name, or "command: PATTERN".
func (r ApproveRule) String() string {
	if r.Command != "" {
		return "command: " + r.Command
	}
	return r.Tool
}

// UnmarshalText reads the string form: a tool name.
func (r *ApproveRule) UnmarshalText(b []byte) error {
	v := ApproveRule{Tool: string(b)}
	if err := v.Validate(); err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalJSON writes a tool rule as its name and a command rule as {"command": PATTERN}.
func (r ApproveRule) MarshalJSON() ([]byte, error) {
	if r.Command == "" {
		return json.Marshal(r.Tool)
	}
	return json.Marshal(map[string]string{"command": r.Command})
}

// UnmarshalJSON reads either form; the object form takes exactly one key, "command" or
// "tool", once. The rule is validated.
func (r *ApproveRule) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return r.UnmarshalText([]byte(s))
	}
	v, err := decodeApproveObject(b)
	if err != nil {
		return err
	}
	if err := v.Validate(); err != nil {
		return err
	}
	*r = v
	return nil
}

// decodeApproveObject reads {"command": S} or {"tool": S}: exactly one key, spelt exactly
// (encoding/json alone would take "Command" and keep the last of two keys), a string value.
func decodeApproveObject(b []byte) (ApproveRule, error) {
	bad := errors.New("approve rule: want a tool name or an object with exactly one key, \"command\" or \"tool\"")
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ApproveRule{}, bad
	}
	k, err := dec.Token()
	key, _ := k.(string)
	if err != nil || (key != "command" && key != "tool") {
		return ApproveRule{}, bad
	}
	v, err := dec.Token()
	val, ok := v.(string)
	if err != nil || !ok {
		return ApproveRule{}, bad
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return ApproveRule{}, bad
	}
	if _, err := dec.Token(); err != io.EOF {
		return ApproveRule{}, errors.New("approve rule: trailing data")
	}
	if key == "command" {
		return ApproveRule{Command: val}, nil
	}
	return ApproveRule{Tool: val}, nil
}

// normal is the rule's normal form, for sorting and comparing: a command pattern with single
// spaces between words.
func (r ApproveRule) normal() ApproveRule {
	if r.Command != "" {
		r.Command = strings.Join(strings.Fields(r.Command), " ")
	}
	return r
}

// Matches reports whether a call of tool with argv (run_command's, else nil) is one r holds:
// every call that is not provably outside it ([ApproveRule.Outside]).
func (r ApproveRule) Matches(tool string, argv []string) bool {
	_, outside := r.Outside(tool, argv)
	return !outside
}

// NeedsApproval returns the first of rules that holds a call of tool with argv
// (run_command's argv; nil for other tools), and whether one does.
func NeedsApproval(rules []ApproveRule, tool string, argv []string) (ApproveRule, bool) {
	var rd *cmdread.Reading // read once, by the first command rule that needs it
	for _, r := range rules {
		if rd == nil && r.Command != "" && tool == "run_command" {
			read := cmdread.Read(argv)
			rd = &read
		}
		if _, outside := r.outsideOf(tool, argv, rd); !outside {
			return r, true
		}
	}
	return ApproveRule{}, false
}

// ValidateApprove checks a list of rules: each valid, at most 256.
func ValidateApprove(rules []ApproveRule) error {
	if len(rules) > maxApproveRules {
		return fmt.Errorf("approve: %d rules; at most %d", len(rules), maxApproveRules)
	}
	var errs []error
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("approve[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// NormalApprove returns rules normalised, sorted by their string form, without duplicates;
// nil when there are none, so a grant without approvals keeps the JSON it always had.
func NormalApprove(rules []ApproveRule) []ApproveRule {
	if len(rules) == 0 {
		return nil
	}
	out := make([]ApproveRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.normal())
	}
	slices.SortFunc(out, func(a, b ApproveRule) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}
