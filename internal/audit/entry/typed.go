package entry

// Typed views of the details readers parse, one per family of kinds. Each is read from a
// decoded details map by its Read function; a field absent or of another type is its zero.

// GatewayCall is what readers take from a [ToolGateway] or [ToolGatewayRefused] entry.
type GatewayCall struct {
	Route, Decision, Model string
	// Usage is set when the call reported token usage (a model call that completed).
	Usage                                   bool
	InputTokens, OutputTokens, CachedTokens float64
	CostNanoUSD                             float64
	// Count is how many refusals a [ToolGatewayRefused] entry stands for (at least 1).
	Count float64
}

// ReadGatewayCall reads a gateway entry's details.
func ReadGatewayCall(d map[string]any) GatewayCall {
	g := GatewayCall{Route: Str(d, KeyRoute), Decision: Str(d, KeyDecision), Model: Str(d, KeyModel),
		Usage: Has(d, KeyInputTokens), InputTokens: Num(d, KeyInputTokens), OutputTokens: Num(d, KeyOutputTokens),
		CachedTokens: Num(d, KeyCachedTokens), CostNanoUSD: Num(d, KeyCostNanoUSD), Count: Num(d, KeyCount)}
	if g.Count < 1 {
		g.Count = 1
	}
	return g
}

// ToolDecision is what readers take from a [ToolCall], [MCPToolCall] or [MCPToolDenied]
// entry, as text for showing; Rest holds every other detail.
type ToolDecision struct {
	Tool, Decision, Reason, Phase string
	Rest                          map[string]any
}

// ReadToolDecision reads a tool decision's details.
func ReadToolDecision(d map[string]any) ToolDecision {
	t := ToolDecision{Tool: Text(d, KeyTool), Decision: Text(d, KeyDecision), Reason: Text(d, KeyReason),
		Phase: Text(d, KeyPhase), Rest: map[string]any{}}
	for k, v := range d {
		switch k {
		case KeyTool, KeyDecision, KeyReason, KeyPhase:
		default:
			t.Rest[k] = v
		}
	}
	return t
}

// Net is what readers take from a [NetConnect], [NetRequest] or [NetClose] entry, as text
// for showing (numbers as they were recorded).
type Net struct {
	Host, Port, Decision, Reason, Via string
	Method, Path                      string // NetRequest
	BytesUp, BytesDown                string // NetClose
	DurationMS, Requests              string // NetClose
}

// ReadNet reads an egress entry's details.
func ReadNet(d map[string]any) Net {
	return Net{Host: Text(d, KeyHost), Port: Text(d, KeyPort), Decision: Text(d, KeyDecision), Reason: Text(d, KeyReason),
		Via: Text(d, KeyVia), Method: Text(d, KeyMethod), Path: Text(d, KeyPath), BytesUp: Text(d, KeyBytesUp),
		BytesDown: Text(d, KeyBytesDown), DurationMS: Text(d, KeyDurationMS), Requests: Text(d, KeyRequests)}
}

// WouldDenyEntry is what readers (`agora capability suggest`, the CLI, the web view) take
// from a [ToolWouldDeny], [NetWouldDeny] or [FileWouldDeny] entry, as text (numbers as they
// were recorded). Fields a kind does not carry are "".
type WouldDenyEntry struct {
	Kind   string // the entry's kind
	Reason string
	Role   string
	// ToolWouldDeny.
	Tool, Command string
	Truncated     bool
	Reporter      string // KeyReporter: "worker", "hook", "sandbox", or "" (the host's, or older)
	// NetWouldDeny.
	Host, Port, Method, Path string
	// FileWouldDeny (Path above is the file's path, relative to the sandbox root or workspace).
	Op string
}

// ReadWouldDeny reads a learn entry's details; ok is false when kind is not a learn kind.
func ReadWouldDeny(kind string, d map[string]any) (w WouldDenyEntry, ok bool) {
	if !WouldDeny(kind) {
		return WouldDenyEntry{}, false
	}
	trunc, _ := d[KeyTruncated].(bool)
	return WouldDenyEntry{Kind: kind, Reason: Text(d, KeyReason), Role: Text(d, KeyRole),
		Tool: Text(d, KeyTool), Command: Text(d, KeyCommand), Truncated: trunc,
		Host: Text(d, KeyHost), Port: Text(d, KeyPort), Method: Text(d, KeyMethod), Path: Text(d, KeyPath),
		Op: Text(d, KeyOp), Reporter: Text(d, KeyReporter)}, true
}
