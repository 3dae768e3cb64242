package runread

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
)

// Snapshot reads run ref from orch.db itself when serve does not answer (notRunning
// is why): read-only, with SQLite's WAL letting a reader in beside a writer, so it is the
// state serve last committed. It says so on stderr; the run's tasks may have moved on in
// their detached supervisors since (serve records that when it starts again).
func Snapshot(ctx context.Context, f *cmdutil.Factory, ref string, notRunning error) (api.Run, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return api.Run{}, err
	}
	path := filepath.Join(dir, home.OrchDir, home.OrchDB)
	db, err := store.OpenReadOnly(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return api.Run{}, fmt.Errorf("%w; and there is no %s to read a snapshot from: no run was ever submitted in this AGORA_HOME", notRunning, path)
	}
	if err != nil {
		return api.Run{}, fmt.Errorf("%w; and reading a snapshot failed: %w", notRunning, err)
	}
	defer db.Close()
	r, err := orch.ReadStatus(ctx, db.SQL(), ref)
	if err != nil {
		return api.Run{}, fmt.Errorf("read a snapshot of %s: %w", path, err)
	}
	NoteShared(f, r)
	fmt.Fprintf(f.IO.ErrOut, "agora: the orchestrator is not running: a snapshot of %s as serve last wrote it; running tasks may have moved on (start 'agora orch serve' to catch up)\n", path)
	return r, nil
}
