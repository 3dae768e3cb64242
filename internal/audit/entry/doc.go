// Package entry is the vocabulary of agora's audit entries: every kind, how a subject is
// spelled, and the detail keys and typed details that readers (obs, verify, web, the CLI)
// parse. Writers (dispatch, gateway, egress/proxy, orch, catalog, mcpserver) and readers
// use these names and nothing else, so a grep for a kind lands here and a renamed key cannot
// leave a reader behind.
//
// Entries are hashed (package audit, RFC 6962 leaves) and their bytes are promised never to
// change: a constant here MUST NOT change its value, and a new spelling is a new kind. The
// golden test (golden_test.go) pins the bytes the builders produce against entries written by
// the code before this package existed.
//
// entry imports the standard library only, like worker/wire holds the sandbox's contract: it
// is linked by both sides of the sandbox and holds no state.
package entry
