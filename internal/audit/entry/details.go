package entry

import (
	"encoding/json"
	"fmt"
	"math"
)

// Keys of the details that readers parse. A writer spells such a key with the constant, so
// a reader and its writer cannot drift apart; keys no reader parses stay where they are
// written.
const (
	// Every kind that names one.
	KeyDecision = "decision" // "allowed", "denied", ... of a gateway, tool, net or MCP entry
	KeyReason   = "reason"   // why: a refusal's reason, a terminal state's reason
	KeyState    = "state"    // a state a run or dispatch reached
	KeyDetail   = "detail"   // free text of a failure, shown redacted
	KeyBy       = "by"       // who asked for a cancel, retry, answer or seal

	// Dispatch entries (dispatch.*).
	KeyTarget      = "target"       // dispatch.accepted: the compute target
	KeySubagent    = "subagent"     // dispatch.accepted, orch.task.fired
	KeyInputDigest = "input_digest" // dispatch.accepted
	KeyEnvs        = "envs"         // dispatch.accepted
	KeyRepo        = "repo"         // dispatch.accepted
	KeyVerify      = "verify"       // dispatch.accepted: present when a verify gate runs
	KeyManifest    = "manifest"     // a dispatch's terminal entry: its manifest's digest
	KeyPatchDigest = "patch_digest" // a dispatch's terminal entry
	KeyVerdict     = "verdict"      // dispatch.verified and a terminal entry: the verdict's digest
	// KeyFinalDigest is a dispatch's terminal entry's digest of the model's final answer its
	// worker vouched for (a review is read from it and nowhere else); absent when none was.
	KeyFinalDigest = "final_digest"
	// KeyOutputSHA256 is dispatch.verified's hex SHA-256 of the gate's output tail (the
	// verdict package writes it: internal/verdict's Details, whose JSON name it is).
	KeyOutputSHA256 = "output_sha256"

	// Retention entries (retention.purged, retention.run_purged).
	KeyProducts = "products" // retention.purged: what went, each an object of the four keys below
	KeyProduct  = "product"  // patch, output:PATH, input, input:KEY/PATH, stdout, stderr, transcript
	KeyDigest   = "digest"   // sha256:HEX of the purged blob
	KeyClass    = "class"    // the retention class that aged it out (blobs, logs)
	KeySize     = "size"     // its size in bytes
	KeyName     = "name"     // retention.run_purged: the run's plan name
	KeyEndedAt  = "ended_at" // retention.run_purged: when the run ended (RFC 3339, nanoseconds)

	// Gateway entries (tool.gateway*).
	KeyRoute        = "route"
	KeyModel        = "model"
	KeyInputTokens  = "input_tokens" // present on a model call that reported usage
	KeyOutputTokens = "output_tokens"
	KeyCachedTokens = "cached_tokens"
	KeyCostNanoUSD  = "cost_nano_usd"
	KeyCount        = "count" // tool.gateway.refused: how many were refused

	// Tool decisions (tool.call, mcp.tool.*).
	KeyTool  = "tool"
	KeyPhase = "phase"

	// Learn entries (*.would_deny; kinds.go).
	KeyCommand   = "command"   // tool.would_deny: the command line of a command tool
	KeyTruncated = "truncated" // tool.would_deny: true when command was cut
	KeyOp        = "op"        // file.would_deny: what was done to the path
	KeyRole      = "role"      // the role a sandbox entry was written for
	KeyLearn     = "learn"     // dispatch.accepted: true for a learn dispatch (absent otherwise)
	// KeyReporter is who could have sent a tool.would_deny the gateway recorded: "worker"
	// (the worker's own report, proven by its key), "hook" (claude's hook, relayed by the
	// worker) or "sandbox" (anything in the sandbox, the agent included). Absent on the host's
	// own entries (an exec subagent's command) and on those recorded before it existed.
	KeyReporter = "reporter"

	// Egress entries (net.*).
	KeyHost       = "host"
	KeyPort       = "port"
	KeyVia        = "via"
	KeyMethod     = "method"
	KeyPath       = "path"
	KeyBytesUp    = "bytes_up"
	KeyBytesDown  = "bytes_down"
	KeyDurationMS = "duration_ms"
	KeyRequests   = "requests"

	// Orchestrator entries (orch.*).
	KeyRunName     = "run_name" // on every orch.run.* and orch.task.* entry
	KeyPlanDigest  = "plan_digest"
	KeyTasks       = "tasks"
	KeyEntries     = "entries" // orch.run.sealed: the run's entries before the seal
	KeyDispatchID  = "dispatch_id"
	KeyAttempt     = "attempt"
	KeyRetryAt     = "retry_at"
	KeyAncestor    = "ancestor"
	KeyWhy         = "why"
	KeyTraceID     = "trace_id"
	KeyTraceParent = "trace_parent"
	KeyTraceSpan   = "trace_span"
)

// Str returns details[key] when it is a string, else "".
func Str(details map[string]any, key string) string {
	s, _ := details[key].(string)
	return s
}

// Text returns details[key] as text: a string as it is, another value as fmt prints it, ""
// when absent or null. It is for showing a value, never for judging one.
func Text(details map[string]any, key string) string {
	switch v := details[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// Num returns details[key] as a non-negative finite number: a [json.Number] (a reader decoding
// with UseNumber) or a Go integer or float (an entry still in memory). Anything else, a
// negative, NaN or infinite value or one that does not parse is 0: a count cannot go back, and
// a counter given +Inf would stay there.
func Num(details map[string]any, key string) float64 {
	var x float64
	switch v := details[key].(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return 0
		}
		x = f
	case int:
		x = float64(v)
	case int64:
		x = float64(v)
	case float64:
		x = v
	default:
		return 0
	}
	if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// Has reports whether details holds key, whatever its value.
func Has(details map[string]any, key string) bool {
	_, ok := details[key]
	return ok
}
