package modelgw

import (
	"encoding/json"
	"fmt"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictjson"
)

// holdingRule is the approve rule of the dispatch's grant that holds a call of tool with
// args (a JSON object that passed [ArgsDigest]'s strict check), computed by the gateway
// from the grant: a request for approval comes from the sandbox, where
// a granted curl can name any tool and any rule text. A call no rule holds is a
// *refusal: nobody is asked to decide it.
//
// A run_command call is held by the rule its argv ("argv", exactly that key, an array of
// strings) matches; Claude Code's Bash by the rule its command line ("command") matches, or
// by the first command rule when the line has shell syntax ([grant.HeldCommandLine]). Any
// other tool is held by a rule naming the agora tool it stands for ([grant.ApprovalTool]).
func (g *Gateway) holdingRule(tool string, args []byte) (grant.ApproveRule, error) {
	name := grant.ApprovalTool(tool)
	var r grant.ApproveRule
	var held bool
	switch {
	case name == "":
	case name != "run_command":
		r, held = grant.NeedsApproval(g.approve, name, nil)
	case tool == "Bash":
		var line string
		if argField(args, "command", &line) {
			r, held = grant.HeldCommandLine(g.approve, line)
		}
	default:
		var argv []string
		if argField(args, "argv", &argv) {
			r, held = grant.NeedsApproval(g.approve, "run_command", argv)
		}
	}
	if !held {
		return grant.ApproveRule{}, &refusal{msg: fmt.Sprintf(
			"no approve rule of this dispatch's grant holds this call of tool %s; only a call a rule holds can be put to a person", quoted(tool, maxToolNameLen))}
	}
	return r, nil
}

// argField reads the member key (spelt exactly so) of the JSON object args into v, and
// reports whether it was there with v's type. args has passed strictjson's check, so no
// other key equals key under case folding.
func argField(args []byte, key string, v any) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return false
	}
	raw, ok := m[key]
	return ok && strictjson.Unmarshal(raw, v) == nil
}
