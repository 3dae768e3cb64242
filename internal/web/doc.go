// Package web is the run view `agora orch serve --http ADDR` serves to people: runs, a run's
// DAG updating live over server-sent events, a task's or dispatch's attempts, events, output
// tails, transcript, patch, tool calls and network decisions from the audit log, the
// dispatches not in a run, the catalog's metadata and the audit log with its checkpoint.
//
// It runs on the host side, inside serve, and holds the same posture as MCP HTTP (see
// internal/mcpserver and internal/hostcheck): no token, no bind; loopback unless explicitly
// opted in; every request's Host and Origin checked before anything else; a browser logs in
// once with its token and gets an HttpOnly, SameSite=Strict session cookie. Every response
// carries a strict Content-Security-Policy, and every asset is embedded: a page never fetches
// anything from another origin. Changing actions (cancel, answer, retry, approve and deny a
// held call) need an operator token (ceiling orchestrate), a CSRF token bound to the session
// on cookie requests, and are recorded with "web:" and the token's name as the actor.
//
// With auth.oidc.web a browser may instead sign in at the identity provider (oidc.go):
// the code flow with PKCE, state and nonce; the rules give the account its role (operator or
// viewer); the session is the same kind, bound to the subject and ending with the ID token,
// and its actions are recorded as web:oidc:ISSUER#sub.
//
// It reads through ports it declares ([Orch], [Dispatches], [Sources]): the engine's
// committed state, dispatch records and blobs, the audit logs. It never writes a database
// itself; every change goes through the engine or the dispatch records, which audit it.
package web
