// Package mcpserver is agora's MCP server: the surface through which AI orchestrators (and any
// other MCP client) compose the human-provisioned catalog into dispatches at run time.
//
// # What it owns
//
//   - Exactly eleven tools, all registered in one file (tools.go) so the privilege boundary can be
//     reviewed in one place; a test lists them through real clients and pins the exact set.
//   - Their closed input schemas and the one decode path every call goes through.
//   - Consent ceilings ([Ceiling]: read < dispatch < orchestrate), bound to the client's
//     credential, never to a transport session: tools/list shows what the ceiling allows and every
//     call is checked again.
//   - The transports: stdio, and streamable HTTP that fails closed ([Server.ListenHTTP]).
//   - One audit entry per tool call and per denial, written BEFORE the call runs; when the entry
//     cannot be written the call is refused.
//
// # What it must never do
//
// It never changes the catalog, never seals or opens a secret and never opens a database: it is
// handed a [Catalog] lister, a [Dispatcher] port, an optional [Orchestrator] port and an
// [AuditFunc], and imports nothing that could do more (internal/deps_test.go pins that it cannot
// reach the catalog writer, the sealer, the store, the manifest reconciler, AGORA_HOME or the
// config loader). It never returns prompts, files, env values, secret values or secret
// references; lists carry metadata only. It never accepts anything that shapes a worker: no
// image, secret reference, callback URL, capability override, sandbox setting or repository.
// Tool errors are one sentence with no stack, host path or token. Tokens are compared in constant
// time and never logged, echoed or forwarded. Over HTTP a token that is no static client's may
// be an OpenID Connect provider's (HTTPConfig.OIDC, oidc.go): internal/oidcauth validates
// it, its rules give the ceiling, and the caller is named oidc:ISSUER#sub. Nothing but MCP
// frames is written to the stdio transport's output.
//
// # Which side
//
// It runs on the host, outside every sandbox, with no more privilege over the catalog than a
// reader. The dispatches it starts run sandboxed and outlive the MCP session: the [Dispatcher]
// port hands them to a detached supervisor.
//
// # Why a dispatch over MCP gets no repository
//
// agora dispatch run --repo PATH lets a person hand a worker a checkout of a repository on the
// host. Over MCP that path would be chosen by a model, possibly one steered by injected text, and
// a worker's patch, outputs and logs come back to the caller: naming ~/.ssh's parent, another
// user's checkout or any readable git directory would turn dispatch into a way to read the
// host's files. The caller of a local stdio server could read them itself, but an HTTP client
// may be on another machine, and a ceiling of "dispatch" should not mean "read any repository
// this process can". So a dispatch over MCP always gets an empty workspace; work that needs a
// repository is dispatched by a person, or by an orchestrator plan a person wrote.
package mcpserver
