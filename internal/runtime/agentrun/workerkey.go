//go:build !agora_worker_exec

package agentrun

import "net/http"

// The worker's key (the worker's workerkey.go claims the gateway with it, the
// gateway's side is modelgw/workerkey.go) travels in these headers on every audit report, and
// ViaHook marks a report the worker relays from a runtime's tool hook. The gateway's names:
// modelgw.WorkerKeyHeader, WorkerViaHeader.
const (
	WorkerKeyHeader = "X-Agora-Worker-Key"
	WorkerViaHeader = "X-Agora-Worker-Via"
	ViaHook         = "hook"
)

// WithKey is g sending the worker's key ("" sends none).
func (g *Gateway) WithKey(key string) *Gateway {
	g.key = key
	return g
}

// keyHeaders sets the key's headers on a request to the gateway.
func (g *Gateway) keyHeaders(req *http.Request, via string) {
	if g.key == "" {
		return
	}
	req.Header.Set(WorkerKeyHeader, g.key)
	if via != "" {
		req.Header.Set(WorkerViaHeader, via)
	}
}
