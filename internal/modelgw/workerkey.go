package modelgw

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"sync"
)

// The worker's key: everything in the sandbox can reach the gateway's socket, so a
// report on /audit/tool proves nothing about who sent it. A learn dispatch's would_deny is
// evidence `agora capability suggest` turns into a grant, so the gateway records who could
// have sent each one. The worker claims the gateway once, at its start, before any process
// of the agent (a setup script, the runtime) exists: it sends a random key it keeps in its
// own memory (non-dumpable: no process of the agent's can read it) on POST /worker/claim,
// and the gateway keeps only the key's hash; the first claim wins and every later one is
// refused. A would_deny carrying that key in WorkerKeyHeader is the worker's own report
// (reporter "worker"), or one the worker relayed from claude's hook (WorkerViaHeader "hook":
// reporter "hook", a process in the agent's tree); any other is reporter "sandbox": the agent
// could have forged it, and suggest does not propose from it.

// Headers of the worker's key.
const (
	WorkerKeyHeader = "X-Agora-Worker-Key"
	WorkerViaHeader = "X-Agora-Worker-Via"
)

// Reporters of a would_deny (entry details "reporter").
const (
	ReporterWorker  = "worker"
	ReporterHook    = "hook"
	ReporterSandbox = "sandbox"
)

// workerKeyLen is the key's length in hex digits (32 random bytes).
const workerKeyLen = 64

// workerClaim holds the hash of the key the worker claimed with.
type workerClaim struct {
	mu      sync.Mutex
	claimed bool
	sum     [sha256.Size]byte
}

// claim keeps key's hash if nobody claimed before; it reports whether it did.
func (c *workerClaim) claim(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claimed {
		return false
	}
	c.claimed, c.sum = true, sha256.Sum256([]byte(key))
	return true
}

// is reports, in constant time, whether key is the claimed one.
func (c *workerClaim) is(key string) bool {
	if len(key) != workerKeyLen {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claimed && subtle.ConstantTimeCompare(sum[:], c.sum[:]) == 1
}

// reporter names who could have sent r: the worker, claude's hook through the worker, or
// anything in the sandbox.
func (c *workerClaim) reporter(r *http.Request) string {
	if !c.is(r.Header.Get(WorkerKeyHeader)) {
		return ReporterSandbox
	}
	if r.Header.Get(WorkerViaHeader) == ReporterHook {
		return ReporterHook
	}
	return ReporterWorker
}

// serveWorkerClaim takes the worker's key, once.
func (g *Gateway) serveWorkerClaim(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if r.Method != http.MethodPost {
		g.methodNotAllowed(w, ex, http.MethodPost)
		return
	}
	body, ok := g.readBody(w, r, ex, 256)
	if !ok {
		return
	}
	var c struct {
		Key string `json:"key"`
	}
	if err := decodeFlat(body, []string{"key"}, &c); err != nil {
		g.refuse(w, ex, http.StatusBadRequest, "worker claim: "+err.Error())
		return
	}
	if !isLowerHex(c.Key, workerKeyLen) {
		g.refuse(w, ex, http.StatusBadRequest, "worker claim: key: want 64 lowercase hex digits")
		return
	}
	if !g.worker.claim(c.Key) {
		g.refuse(w, ex, http.StatusConflict, "worker claim: the worker has claimed this gateway already")
		return
	}
	ex.decision = decisionAllowed
	w.WriteHeader(http.StatusNoContent)
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
