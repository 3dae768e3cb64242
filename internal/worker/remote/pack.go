package remote

import (
	"io"
	"io/fs"

	"github.com/agora-dev/agora/internal/roottar"
)

// Pack writes dir's regular files and directories to w as a tar, walking beneath dir with
// os.Root and never following a symlink. Symlinks, FIFOs, sockets and devices are left out:
// the host takes regular files and directories only, and reads only what result.json
// declares, which the worker lists as regular files. So is what the worker may not open (an
// agent's chmod 000 of a file or directory it wrote in out/outputs): the worker could not
// hash it either, and says so in result.json, which must still reach the host (otherwise
// the whole upload fails on it, and is retried as a gateway outage).
func Pack(w io.Writer, dir string) error {
	return roottar.WriteDir(w, dir, roottar.Options{
		SkipDenied: true, SkipChanged: true, DirMode: 0o700,
		FileMode: func(fs.FileMode) int64 { return 0o600 },
	})
}
