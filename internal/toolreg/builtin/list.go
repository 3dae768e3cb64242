package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/toolreg"
)

// maxListEntries caps the entries one list_files call returns.
const maxListEntries = 2000

// skipDirs are directories a recursive listing or a search does not descend into.
var skipDirs = map[string]bool{".git": true}

func listFilesTool(ws workspace) toolreg.Tool {
	return toolreg.Tool{
		Name: "list_files",
		Description: "List a directory of the workspace (default: its root), one entry per line, relative to the workspace root. " +
			"Directories end in /, symbolic links in @. With recursive, subdirectories are listed too (.git is not entered; " +
			"symbolic links are not followed). At most 2000 entries.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path":      {"type": "string", "maxLength": 4096, "description": "Directory relative to the workspace root (default: the root)."},
				"recursive": {"type": "boolean", "description": "List subdirectories too (default false)."}
			},
			"additionalProperties": false
		}`),
		ReadOnly: true,
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				Path      string `json:"path"`
				Recursive bool   `json:"recursive"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			return ws.list(ctx, a.Path, a.Recursive)
		},
	}
}

func (w workspace) list(ctx context.Context, p string, recursive bool) (toolreg.Result, error) {
	const tool = "list_files"
	root, name, fi, err := w.stat(tool, p)
	if err != nil {
		return toolreg.Result{}, err
	}
	defer root.Close()
	if !fi.IsDir() {
		return toolreg.Result{}, errors.New(tool + ": not a directory; use read_file")
	}
	fsys := root.FS()
	var lines []string
	capped := false
	add := func(p string, d fs.DirEntry) bool {
		if len(lines) == maxListEntries {
			capped = true
			return false
		}
		lines = append(lines, entryLine(p, d))
		return true
	}
	if !recursive {
		entries, err := fs.ReadDir(fsys, name)
		if err != nil {
			return toolreg.Result{}, fsError(tool, err)
		}
		for _, d := range entries {
			if !add(path.Join(name, d.Name()), d) {
				break
			}
		}
	} else {
		err := fs.WalkDir(fsys, name, func(p string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				if p == name {
					return err
				}
				return nil // an unreadable subdirectory is listed, not entered
			}
			if p == name {
				return nil
			}
			if !add(p, d) {
				return fs.SkipAll
			}
			if d.IsDir() && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return toolreg.Result{}, errors.New(tool + ": cancelled")
			}
			return toolreg.Result{}, fsError(tool, err)
		}
	}
	if len(lines) == 0 {
		return toolreg.Result{Content: "[empty directory]"}, nil
	}
	out := strings.Join(lines, "\n")
	if capped {
		out += "\n[listing capped at " + itoa(maxListEntries) + " entries]"
	}
	return toolreg.Result{Content: out}, nil
}

// entryLine formats one entry: directories end in "/", symbolic links in "@".
func entryLine(p string, d fs.DirEntry) string {
	p = displayPath(p)
	switch {
	case d.Type()&fs.ModeSymlink != 0:
		return p + "@"
	case d.IsDir():
		return p + "/"
	}
	return p
}

// displayPath returns p as is, or Go-quoted when it holds control characters, invalid
// UTF-8, a leading quote or a trailing "@", so that a file name cannot forge lines of a
// listing or pass for a symbolic link.
func displayPath(p string) string {
	if !utf8.ValidString(p) || strings.HasPrefix(p, `"`) || strings.HasSuffix(p, "@") ||
		strings.ContainsFunc(p, unicode.IsControl) {
		return strconv.Quote(p)
	}
	return p
}
