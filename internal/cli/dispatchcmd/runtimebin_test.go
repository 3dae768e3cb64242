package dispatchcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestPrintRecord_RuntimeBinary: `agora dispatch describe` shows the host CLI a dispatch ran:
// its host path, version, sha256 and where it was bound.
func TestPrintRecord_RuntimeBinary(t *testing.T) {
	sum := strings.Repeat("c", 64)
	r := &dispatch.Record{ID: "d1", State: lifecycle.DispatchFinished, RuntimeBinary: &wire.RuntimeBinary{
		Path: "/agora/runtime/bin/claude", HostPath: "/opt/claude/claude", Version: "2.1.330 (Claude Code)", SHA256: sum,
	}}
	var b bytes.Buffer
	printRecord(&b, r)
	want := "runtime:   /opt/claude/claude (2.1.330 (Claude Code), sha256 " + sum + ", bound read-only at /agora/runtime/bin/claude)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("describe output lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	r.RuntimeBinary = nil
	printRecord(&b, r)
	if strings.Contains(b.String(), "runtime:") {
		t.Errorf("a dispatch without a host CLI shows one:\n%s", b.String())
	}
}
