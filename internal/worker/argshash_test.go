package worker

import (
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// TestArgsHash_KeyOrder: claude prints a call's input as the model wrote it and
// gives its hook the input in its own schema's key order; the hook's report and the printed
// call must hash alike, or the worker takes a real would_deny for one naming another call
// and stops the run (it did, for a WebFetch written {"prompt","url"}). Different inputs
// still differ, a secret is still masked first, and an input jcs cannot encode (a fraction)
// still hashes.
func TestArgsHash_KeyOrder(t *testing.T) {
	red := redact.New([][]byte{[]byte("sk-learn3-secret-0123456789")})
	a := agentrun.ArgsHash(red, []byte(`{"prompt":"what","url":"https://x.example/"}`))
	b := agentrun.ArgsHash(red, []byte(`{ "url" : "https://x.example/", "prompt":"what" }`))
	if a != b {
		t.Errorf("the same input in another key order hashes %s and %s", a, b)
	}
	if c := agentrun.ArgsHash(red, []byte(`{"prompt":"what","url":"https://y.example/"}`)); c == a {
		t.Error("another input hashes alike")
	}
	if agentrun.ArgsHash(red, []byte(`{"k":"sk-learn3-secret-0123456789"}`)) == agentrun.ArgsHash(redact.New(nil), []byte(`{"k":"sk-learn3-secret-0123456789"}`)) {
		t.Error("a secret in the input is hashed unmasked")
	}
	if f, g := agentrun.ArgsHash(red, []byte(`{"t":1.5,"a":1}`)), agentrun.ArgsHash(red, []byte(`{"t":1.5,"a":1}`)); f != g || f == "" {
		t.Error("an input with a fraction does not hash stably")
	}
}
