package detach

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStandbys_StartSeesADeadStandbyAtOnce: a standby killed with -9 while it
// makes its slot (before its ready line) is seen as soon as it dies. serve held the standby's
// end of the socketpair open for the whole start, so the read waited for standbyReadyWithin
// (a minute) and the pool stood short that long: the start must fail on the socket's EOF,
// never on its read deadline. Failed before: "read unix @->@: i/o timeout" after 60 s.
func TestStandbys_StartSeesADeadStandbyAtOnce(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agora")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nkill -9 $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Standbys{bin: bin, stateDir: dir, targets: map[string]int{"pods": 1}, log: slog.New(slog.DiscardHandler), ctx: t.Context(),
		sweep: func(context.Context) error { return nil }}
	_, err := s.start(t.Context(), "pods")
	if err == nil || !strings.Contains(err.Error(), io.EOF.Error()) {
		t.Fatalf("start of a standby killed before its ready line = %v, want its EOF", err)
	}
}
