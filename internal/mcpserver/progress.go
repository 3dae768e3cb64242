package mcpserver

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that sends a progress token with a long call (agora_dispatch waiting for its
// dispatch, agora_orchestrator_watch) gets MCP progress notifications while it waits: each
// state change and the time elapsed. Without a token nothing is sent.

type progressKey struct{}

// progressFunc sends one notification with message.
type progressFunc func(message string)

// withProgress returns ctx carrying a progressFunc for req, when req asked for progress.
func withProgress(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil || req.Session == nil || req.Params == nil {
		return ctx
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return ctx
	}
	var mu sync.Mutex
	n := 0.0
	notify := func(message string) {
		mu.Lock()
		defer mu.Unlock()
		n++ // progress only grows
		// A notification the client no longer reads is no reason to fail the call.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: message})
	}
	return context.WithValue(ctx, progressKey{}, progressFunc(notify))
}

// progressOf is ctx's progressFunc, or one that sends nothing.
func progressOf(ctx context.Context) progressFunc {
	if f, ok := ctx.Value(progressKey{}).(progressFunc); ok {
		return f
	}
	return func(string) {}
}
