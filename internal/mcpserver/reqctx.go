package mcpserver

import (
	"context"
	"net/http"
)

// The SDK runs a tool call with a context detached from the HTTP request that carried it (it
// keeps the request's values, not its end). A client that drops its connection mid-call (no
// cancel notification, the TCP connection just closes) therefore left the call running: a
// describe or dispatch waiting up to 300 s held its goroutine, the shared poll of its dispatch
// and one of the client's in-flight requests (the stateless handler returns only when the
// call does), so a client whose requests time out was refused as "too many in flight" for
// minutes. The HTTP path puts each request's own context among its values, and the guard ends
// the call when that request ends, as a cancel notification would.

// httpRequestKey holds, in a request's context values, the request's own context.
type httpRequestKey struct{}

// withRequestContext passes each request's context to the tool calls it carries. The server
// is stateless, so every call's session is this one request's.
func withRequestContext(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), httpRequestKey{}, r.Context())))
	})
}

// untilRequestEnds returns ctx ended also when the HTTP request that carried the call ends
// (over stdio there is none: ctx as it is), and the function that releases it.
func untilRequestEnds(ctx context.Context) (context.Context, func()) {
	rc, ok := ctx.Value(httpRequestKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(rc, cancel)
	return ctx, func() { stop(); cancel() }
}
