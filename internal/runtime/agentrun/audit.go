package agentrun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// ArgsHash is "sha256:" and the hex SHA-256 of a tool input as canonical JSON (RFC 8785,
// internal/jcs; compact JSON for an input it cannot encode, one holding a fraction) with
// the secret values masked, so it cannot confirm a guess of one. The hook and the worker
// hash the same call, so a call's entries carry the same hash: canonical, because claude
// prints the input as the model wrote it but gives its hook the input as its own schema
// orders the keys (learn3: a WebFetch written {"prompt","url"} reached the hook as
// {"url","prompt"}, so the worker found its would_deny naming another call and stopped the
// run).
func ArgsHash(red *redact.Redactor, input json.RawMessage) string {
	var b bytes.Buffer
	if c, ok := canonicalInput(input); ok {
		b.Write(c)
	} else if len(input) == 0 || json.Compact(&b, input) != nil {
		b.Reset()
		b.WriteString("null")
	}
	sum := sha256.Sum256(red.Bytes(b.Bytes()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalInput is input as RFC 8785 bytes, when it is one JSON value jcs can encode.
func canonicalInput(input json.RawMessage) ([]byte, bool) {
	if len(input) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	c, err := jcs.Marshal(v)
	return c, err == nil
}

// AuditCallID returns id when the gateway accepts it as a call id (1 to 128 letters,
// digits, '_' and '-', as Claude's "toolu_…" ids are), and else a stable stand-in derived
// from it, so a call's entries still pair up.
func AuditCallID(id string) string {
	ok := id != "" && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "id-sha256-" + hex.EncodeToString(sum[:16])
}

// RefusalOutsideWorkspace is [editRefusal]'s answer for a path outside the workspace (not
// .git): the one a learn dispatch learns (claudeadapter's claudelearn.go, codexadapter's
// codexlearn.go).
const RefusalOutsideWorkspace = "a file tool writes only inside the workspace, and this path resolves outside it"
