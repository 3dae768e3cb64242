package worker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// maxMaskedBinaries bounds how many staged binary files capture inspects for secrets.
const maxMaskedBinaries = 4096

// maskBinarySecrets replaces, in the capture index, every changed binary file that holds a
// secret value (in any form the redactor knows) with its redacted bytes. The host redacts
// the patch text, but `git diff --binary` deflates and base85-encodes binary content, which
// hides a secret from it; a build product with the token baked in would otherwise carry the
// secret to whoever applies the patch. The workspace is not touched:
// only what the patch says changes. A text file is left to the host's redaction.
func (r *runner) maskBinarySecrets(ctx context.Context) error {
	if len(r.secrets) == 0 {
		return nil
	}
	values := make([][]byte, 0, len(r.secrets))
	for _, k := range slices.Sorted(maps.Keys(r.secrets)) {
		values = append(values, []byte(r.secrets[k]))
	}
	red := redact.New(values)
	if red.Empty() {
		return nil
	}
	g := r.git
	var numstat bytes.Buffer
	if err := g.run(ctx, &numstat, "diff", "--cached", "--numstat", "-z", "--no-renames", g.tree, "--"); err != nil {
		return err
	}
	// -z numstat: "added\tdeleted\tpath\0"; a binary file counts "-\t-".
	n := 0
	for _, rec := range strings.Split(numstat.String(), "\x00") {
		path, ok := strings.CutPrefix(rec, "-\t-\t")
		if !ok || path == "" {
			continue
		}
		if n++; n > maxMaskedBinaries {
			return fmt.Errorf("more than %d binary files changed: too many to check for secrets", maxMaskedBinaries)
		}
		if err := g.maskStaged(ctx, red, path); err != nil {
			return err
		}
	}
	return nil
}

// maskStaged rewrites the index entry of path with its blob redacted, when that changes it.
func (g *gitDir) maskStaged(ctx context.Context, red *redact.Redactor, path string) error {
	var ls bytes.Buffer
	if err := g.run(ctx, &ls, "ls-files", "--stage", "-z", "--", ":(literal)"+path); err != nil {
		return err
	}
	// "<mode> <object> <stage>\t<path>\0"
	meta, _, ok := strings.Cut(ls.String(), "\t")
	f := strings.Fields(meta)
	if !ok || len(f) != 3 {
		return nil // deleted: nothing staged to carry a secret
	}
	mode, object := f[0], f[1]
	if mode == "160000" || mode == "120000" {
		return nil // a gitlink or a symlink: no content of its own in the patch
	}
	var blob bytes.Buffer
	if err := g.run(ctx, &blob, "cat-file", "blob", object); err != nil {
		return err
	}
	masked := red.Bytes(blob.Bytes())
	if bytes.Equal(masked, blob.Bytes()) {
		return nil
	}
	var id bytes.Buffer
	if err := g.runStdin(ctx, bytes.NewReader(masked), &id, "hash-object", "-w", "--stdin", "--no-filters"); err != nil {
		return err
	}
	return g.run(ctx, nil, "update-index", "--cacheinfo", mode+","+strings.TrimSpace(id.String())+","+path)
}
