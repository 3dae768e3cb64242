// Package toolreg is the RBAC tool registry (DESIGN.md §6, the seed's RBAC ADR): tools
// register by name with a closed JSON Schema for their arguments, and a worker's runtime is
// handed a default-deny [View] scoped to the grants of its subagent's capabilities, never the
// [Registry] itself.
//
// toolreg owns the access check, argument validation and the audit hand-off: [View.List],
// [View.Lookup] and [View.Call] consult the same per-view table; every call, allowed, denied
// or failed, produces exactly one [Decision] for the [Auditor], naming the dispatch, the role
// ("subagent@sha256:…"), the tool and a hash of the redacted arguments. The grant itself, and
// its narrowing, are package grant's.
//
// toolreg runs INSIDE the sandbox, in the worker process. It MUST NOT import store, audit,
// dispatch or anything else host-side: audit records leave through the [Auditor] interface,
// which the worker wires to the host-side gateway. It does no I/O of its own; the built-in
// tools live in package toolreg/builtin.
package toolreg
