// Package mcphost adapts the host's services to the ports of package mcpserver: the
// dispatcher (each dispatch handed to a detached supervisor, so it outlives the MCP session),
// the orchestrator service's client (submit, status and watch only) and the audit log.
//
// It is the privileged half of 'agora mcp': it imports dispatch, the orchestrator client and
// audit so that mcpserver never does (internal/deps_test.go pins that). What crosses to the
// server is the port's view only: a record carries no repository path, callback URL, provider
// task id or partial state, and an error is the port's own (a request error or not found).
// Nothing an MCP client could not have started crosses at all: a dispatch or run on a
// repository path a person gave on the host's command line is refused, and a run's attempt
// is read-only (answer or cancel it through its run, on the host).
package mcphost
