package codexadapter

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun/agentruntest"
	"go.uber.org/goleak"
)

// The codex adapter's tests run it against the real gateway (the host side, imported by
// tests only) and a fake codex or the real CLI; these helpers are the worker's tests' own.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSecret = "s3cret-value-0123456789"

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// memAuditor keeps the gateway's records.
type memAuditor = agentruntest.Auditor
