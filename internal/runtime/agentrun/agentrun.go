package agentrun

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/agora-dev/agora/internal/grant"
)

// Adapter runs the agent: each runtime's adapter (internal/runtime/<dir>/<name>adapter)
// maps an [Invocation] to its own API. The worker picks it by the manifest's runtime from
// the one table (package runtimes/adapters).
type Adapter interface {
	Run(ctx context.Context, inv Invocation) (Exit, error)
}

// Invocation is everything a runtime gets.
type Invocation struct {
	Command        []string // exec: argv, granted by the capabilities
	Dir            string   // the workspace
	Env            []string
	Stdout, Stderr io.Writer
	Timeout        time.Duration

	// The model runtimes (openai, claude-code) also get these.
	DispatchID    string
	Role          string // "subagent@sha256:<hex>", the view's and the audit's
	Grants        grant.Set
	Model         string
	SystemPrompt  string
	Prompt        string      // the user prompt, from the input
	Secrets       [][]byte    // the bundle's secret values, masked in audited argument hashes
	Out           string      // the out directory
	Transcript    *Transcript // the model runtimes' transcript, kept in memory (the worker's answer.go)
	Tmp           string      // private scratch, outside the workspace
	GatewaySocket string      // the gateway's socket
	// DialHost, in remote mode, connects to a host socket by name through the network
	// gateway; nil elsewhere.
	DialHost  func(ctx context.Context, socket string) (net.Conn, error)
	MCPConfig []byte // the capabilities' MCP config (claude-code), nil for none
	// binary is the runtime's CLI as the host bound it (read-only, outside the workspace);
	// "" looks the program up on the sandbox's PATH.
	Binary string
	// ApprovalTimeout is the longest a call held for approval waits (the manifest's).
	ApprovalTimeout time.Duration
	// learn: a learn dispatch (the manifest's): the runtimes' gates report what the grant
	// would refuse as would_deny, then let it run (docs/learn.md).
	Learn bool
	// WorkerKey is the key the worker claimed the gateway with ("" outside learn).
	WorkerKey string
}

// Exit is how the agent ended.
type Exit struct {
	ExitCode int // -1 when killed by a signal
	TimedOut bool
	// Failure, when not empty, fails the dispatch (worker-failed, or timeout with TimedOut)
	// with this detail: how an in-process runtime reports a loop that ended without an
	// answer.
	Failure string
	// Final is the model's last answer; the worker writes it to out/outputs/final.md.
	Final *string
	// Question is a question for a person; the worker writes it to out/needs_input.json
	// and the dispatch ends needs_input.
	Question string
}

// Hooker is an adapter whose runtime runs a tool hook of agora's: a process of its own,
// started by the runtime's CLI for each tool event as `agora-worker worker hook ARGS...`,
// whose exit code the CLI reads (claude-code's: 2 refuses the call).
type Hooker interface {
	HookMain(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int
}
