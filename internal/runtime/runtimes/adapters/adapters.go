// Package adapters is the worker's table of runtime adapters: for each runtime of
// [runtimes.All], in its order, the adapter in that runtime's directory
// (internal/runtime/<dir>/<name>adapter, type Adapter). The table (adapters_gen.go) is
// generated from runtimes.All's line, so a runtime is registered once:
//
//	go generate ./internal/runtime/runtimes/adapters
//
// TestAdapters_Generated fails when the table and runtimes.All drift apart. The worker links
// this package and the host never does: the adapters run in the sandbox
// (internal/deps_test.go).
package adapters

//go:generate go run ./gentable

import (
	"github.com/agora-dev/agora/internal/runtime/agentrun"
)

// entry is one runtime's line of the table.
type entry struct {
	name    string
	adapter agentrun.Adapter
}

// For returns the adapter of the runtime called name.
func For(name string) (agentrun.Adapter, bool) {
	for _, e := range table() {
		if e.name == name {
			return e.adapter, true
		}
	}
	return nil, false
}

// Hook returns the adapter whose tool hook `agora-worker worker hook` runs (claude-code's:
// claude runs it for each tool event), or nil. The hook's command line names no runtime, so
// at most one runtime has one (TestAdapters_AtMostOneHook).
func Hook() agentrun.Hooker {
	for _, e := range table() {
		if h, ok := e.adapter.(agentrun.Hooker); ok {
			return h
		}
	}
	return nil
}
