// Package modelgw is the per-dispatch model gateway, the host-side door out of a sandbox: an
// HTTP server on a Unix socket that the dispatch supervisor starts for one dispatch and binds
// into that dispatch's sandbox. (It is not the network gateway `agora gateway` runs for remote
// workers: that is package netgw.) A
// sandbox has no network; the worker's model calls and its granted HTTP fetches leave it only
// through here.
//
// # What it owns
//
//   - POST /model/chat/completions, POST /model/responses (the Responses API, which the Codex
//     CLI speaks) and GET /model/models: forwarded to [Config.ModelBaseURL].
//     Every header from the sandbox is dropped except Content-Type and Accept, and the
//     gateway sets Authorization from [Config.APIKey] itself, so the key never enters the
//     sandbox. Responses pass through a redactor for the key (in case the server echoes it)
//     and an allow-list of response headers; event streams are passed through line by line
//     as they arrive, not buffered. Redirects from the model endpoint are not followed.
//     Upstream requests ask for "Accept-Encoding: identity", and a body in any other content
//     coding is refused with 502: compressed, the key would pass the redactor unseen.
//   - POST /anthropic/v1/messages and POST /anthropic/v1/messages/count_tokens, when
//     [Config.ModelAPI] is [APIAnthropic] (Claude Code; the OpenAI routes are then refused,
//     and the other way round): forwarded the same way, with the sandbox's anthropic-version
//     and anthropic-beta headers (checked to be plain tokens) and the key as x-api-key. The
//     query string is never forwarded.
//   - POST /fetch {"url": "...", "method": "GET"|"HEAD"}: an http or https URL without
//     userinfo whose host is granted by [Config.Egress] (an exact host or "*.domain" for
//     proper subdomains), fetched with no header from the sandbox; every redirect hop is
//     vetted against the grants again. The reply is JSON: status, content type, the body in
//     base64 (at most [Config.MaxBody] bytes) and whether it was truncated. Fetches ask for
//     identity and refuse an encoded body like model requests.
//   - POST /audit/tool: the worker's tool-call decisions, recorded as entry.ToolCall under the
//     dispatch id and role from [Config], never from the request. A decision the [Auditor]
//     did not keep is answered 503, so the worker fails that call closed. claude-code's hooks
//     report each call twice, with a phase ("pre": decision "requested" before the tool
//     runs; "post": what came of it) and the call's id. Anything in the sandbox can reach
//     the socket, so these are the sandbox's reports, checked and masked, not proofs. The
//     gateway keeps them consistent per call id: at most one "pre"; a "post" only after a
//     "pre" "requested", and once; a report without a phase only as the call's one report.
//     Any other is refused (400). A report whose tool, call_id, phase, decision or args_hash
//     holds a form of the key or of a secret is refused (400) too: those fields are recorded
//     verbatim, so that they can be read and paired, and only the reason is masked.
//   - POST /approval {"tool", "call_id", "rule", "args"}: a call an approve rule holds. The
//     gateway finds the rule itself, in [Config.Approve] (the request's "rule" is ignored),
//     and refuses (403, a denied entry of its own) a call no rule holds, so nothing in the
//     sandbox can put a made-up call to a person. It digests the canonical arguments and
//     builds what a person reads itself: a preview whose identifying fields (path, argv,
//     url...) come first and whole and whose cuts are marked unmistakably, and the whole
//     arguments, both masked (preview.go). It charges two entries to the audit budget, and
//     answers {"decision", "reason", "actor", "args_digest"} once its [Approver] says how a
//     person (or the timeout) decided. Served only with [Config.Approver] (see approval.go).
//
// # Masking
//
// The key is masked in every form [redact.Redactor] knows (raw, base64 of every flavour and
// alignment, hex, URL and JSON escaping) wherever an upstream's bytes reach the sandbox:
// passed headers, bodies, event streams line by line, fetched bodies and content types.
// What the gateway shortens it masks first and cuts after, so a cut never leaves the first
// part of the key (a truncated fetched body loses the few bytes the redactor still held).
// The key and [Config.Secrets] are masked the same way in every audit field with free text
// (reasons, hosts, paths); a refusal repeats a value from the sandbox or an upstream (a
// method, a host, a content coding) whole and as sent, or gives only its length, never a
// cut or lowercased copy, which the redactor would not recognise.
//
// # Audit, and its bounds
//
// Every request the gateway serves, and every policy refusal worth seeing alone (a fetch of
// a host outside the grant, a private address, a refused content coding), is recorded once
// as [entry.ToolGateway] with the route, method, host, path, status, byte counts, duration,
// decision and reason. Refusals the sandbox can provoke at will (400, 404, 405, 413, 429,
// and 503 for too many in flight or closing) are only counted: one [entry.ToolGatewayRefused]
// entry per route and reason each [Config.RefusalInterval] and at Close, so a flood of them
// costs the audit log a bounded number of entries. Every entry the gateway writes, the
// tool.call reports included, is charged to the dispatch's audit budget
// ([Config.MaxAuditEntries], [Config.MaxAuditBytes]); when it is spent, one
// [entry.ToolGatewayBudget] entry says so, [Config.OnLimit] is called once (the supervisor stops
// the sandbox and fails the dispatch limit-exceeded), and every later request is refused
// with 503 and no entry. Requests are size-capped, limited in number in flight and in rate,
// and bounded by server timeouts.
//
// # Budgets
//
// Every model call is counted and its response's usage read as it passes (package budget's
// Response, teed from the upstream body; nothing is held). Before a model call is forwarded,
// and before its body is read, [Config.Meter] is asked whether the dispatch's budget is
// spent; if it is, the call is refused 400 with an error body in the API's own shape, its own
// [entry.ToolGateway] entry (denied, "budget exceeded: ..."; never merely counted), and
// [Config.OnBudget]. A new model route passes its response shape to serveModel and is
// counted and checked the same way.
//
// Every POST model route's body is read for its model, exactly (strictjson: one reading, no
// duplicate or case-folded key at any level), and forwarded only when it names
// [Config.Model] and, under a usd budget, a model with a price (modelpin.go); otherwise it is
// refused 400 in the API's own shape with a denied entry of its own. The same read refuses
// what the provider would run on the dispatch's account (provider-run tools, remote MCP
// servers, a background response) and, under a usd budget, a rate above the standard one
// (modelreach.go). A call is priced as the model it was forwarded for, never as the name its
// response carries.
//
// # Connections
//
// Every open connection costs the supervisor, on the host and outside the sandbox's memory
// limit, a goroutine and its buffers, and the request limits do not count connections. So
// the gateway accepts at most 64 at a time (connlimit.go says why 64); more wait in the
// socket's listen queue, in the kernel, until one closes. A connection that sends no complete
// request header for 5 seconds, or stays idle that long after an answer, is closed. Each
// sandbox process may also hold at most 4096 descriptors (RLIMIT_NOFILE, set by
// internal/compute/local).
//
// # What it must never do
//
// The gateway MUST dial only through [Config.Dialer] (the egress SSRF-safe dialer, whose
// policy decides private addresses), MUST NOT forward a header, credential or cookie from the
// sandbox, and MUST NOT put the API key, a request or response body, or a query string in any
// response it writes, audit record or error. It MUST NOT write an audit entry per refusal the
// sandbox can provoke, nor any entry past the budget or after Close returns. It runs on the
// host side only; nothing in the sandbox imports it.
//
// Its files are split by concern (routes, bodies, model requests, fetches, tool reports and
// their per-call state, approvals and what a person is shown of them, audit bounds, the
// socket and its connection cap); they stay one package because every one works on the
// [Gateway]'s state.
package modelgw
