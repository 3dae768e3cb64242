package tracing

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
)

// allowedKeys are the only span attributes agora exports (docs/operations.md lists them with
// what each holds). An attribute with any other key is dropped: a value that has not been
// reviewed never leaves the host.
var allowedKeys = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"agora.run.id": true, "agora.run.name": true, "agora.run.state": true, "agora.run.tasks": true,
		"agora.task.id": true, "agora.task.state": true, "agora.task.attempts": true,
		"agora.dispatch.id": true, "agora.dispatch.attempt": true, "agora.dispatch.state": true, "agora.dispatch.reason": true,
		"agora.subagent": true, "agora.subagent.digest": true, "agora.capabilities": true, "agora.runtime": true,
		"agora.target": true, "agora.sandbox": true, "agora.network": true, "agora.exit_code": true,
		"agora.phase": true, "agora.route": true, "agora.decision": true, "agora.reason": true,
		"agora.tool.decision": true, "agora.tool.reason": true, "agora.tool.phase": true, "agora.cost_usd": true,
		"gen_ai.operation.name": true, "gen_ai.provider.name": true, "gen_ai.system": true,
		"gen_ai.request.model": true, "gen_ai.response.model": true,
		"gen_ai.usage.input_tokens": true, "gen_ai.usage.output_tokens": true,
		"gen_ai.tool.name": true, "gen_ai.tool.call.id": true,
		"http.response.status_code": true, "error.type": true,
	}
})

// maxValue clips every string attribute and status; a reason is short, and a long value is
// more likely something that should not be there.
const maxValue = 256

// maxList caps a string list attribute (capability names).
const maxList = 64

// attrs turns alternating keys and values into attributes, keeping allowed keys and the
// value types that can carry no structure.
func attrs(kv []any) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok || !allowedKeys()[k] {
			continue
		}
		switch v := kv[i+1].(type) {
		case string:
			if v != "" {
				out = append(out, attribute.String(k, clip(v)))
			}
		case int:
			out = append(out, attribute.Int(k, v))
		case int64:
			out = append(out, attribute.Int64(k, v))
		case bool:
			out = append(out, attribute.Bool(k, v))
		case float64:
			out = append(out, attribute.Float64(k, v))
		case []string:
			v = v[:min(len(v), maxList)]
			c := make([]string, len(v))
			for j, s := range v {
				c[j] = clip(s)
			}
			out = append(out, attribute.StringSlice(k, c))
		}
	}
	return out
}

// clip cuts s to maxValue bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxValue {
		return s
	}
	n := maxValue
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
