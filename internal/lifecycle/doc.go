// Package lifecycle is the vocabulary of how agora's work moves and ends: the states of a
// dispatch, of an orchestrator task and of a run, and the reasons one fails. Writers
// (dispatch, the worker, the orchestrator) and readers (the CLI, the MCP server, obs,
// retention, verify, the web view) use these names and nothing else, so a grep for a state
// lands here, a new state reaches every reader that lists them (a metric series each), and a
// reader cannot drift from the writers on a spelling.
//
// The words are stored (agora.db, orch.db), recorded in signed audit entries and sent over
// the wire (result.json, the orchestrator's socket, MCP): a constant here MUST NOT change its
// value, and a new spelling is a new state or reason. lifecycle_test.go pins every byte.
//
// The constants are untyped, so one word serves a plain string field (a record's State) and
// a typed one (the worker wire's Reason) alike. lifecycle imports the standard library only:
// the worker links it inside the sandbox and the host links it everywhere.
package lifecycle
