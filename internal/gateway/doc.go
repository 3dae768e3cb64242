// Package gateway is the host-side door out of a sandbox: an HTTP server on a Unix socket that
// the dispatch supervisor starts for one dispatch and binds into that dispatch's sandbox. A
// sandbox has no network; the worker's model calls and its granted HTTP fetches leave it only
// through here.
//
// # What it owns
//
//   - POST /model/chat/completions and GET /model/models: forwarded to [Config.ModelBaseURL].
//     Every header from the sandbox is dropped except Content-Type and Accept, and the
//     gateway sets Authorization from [Config.APIKey] itself, so the key never enters the
//     sandbox. Responses pass through a redactor for the key (in case the server echoes it)
//     and an allow-list of response headers; event streams are passed through line by line
//     as they arrive, not buffered. Redirects from the model endpoint are not followed.
//   - POST /anthropic/v1/messages and POST /anthropic/v1/messages/count_tokens, when
//     [Config.ModelAPI] is [APIAnthropic] (Claude Code; the OpenAI routes are then refused,
//     and the other way round): forwarded the same way, with the sandbox's anthropic-version
//     and anthropic-beta headers (checked to be plain tokens) and the key as x-api-key. The
//     query string is never forwarded.
//   - POST /fetch {"url": "...", "method": "GET"|"HEAD"}: an http or https URL without
//     userinfo whose host is granted by [Config.Egress] (an exact host or "*.domain" for
//     proper subdomains), fetched with no header from the sandbox; every redirect hop is
//     vetted against the grants again. The reply is JSON: status, content type, the body in
//     base64 (at most [Config.MaxBody] bytes) and whether it was truncated.
//   - POST /audit/tool: the worker's tool-call decisions, recorded as "tool.call" under the
//     dispatch id and role from [Config], never from the request. A decision the [Auditor]
//     did not keep is answered 503, so the worker fails that call closed.
//
// Every request, allowed or refused, on any route, is recorded once as "tool.gateway" with the
// route, method, host, path, status, byte counts, duration, decision and reason. Requests are
// size-capped, limited in number in flight and in rate, and bounded by server timeouts.
//
// # What it must never do
//
// The gateway MUST dial only through [Config.Dialer] (the egress SSRF-safe dialer, whose
// policy decides private addresses), MUST NOT forward a header, credential or cookie from the
// sandbox, and MUST NOT put the API key, a request or response body, or a query string in any
// response it writes, audit record or error. It runs on the host side only; nothing in the
// sandbox imports it.
package gateway
