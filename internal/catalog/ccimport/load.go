package ccimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// Limits on one import: a .claude/agents directory holds tens of files.
const (
	maxFiles      = 1000
	maxTotalBytes = 64 << 20
)

// Set is the subagent files of one import, read and mapped.
type Set struct {
	// Root is the directory (or single file) the import was given, as given.
	Root string `json:"-"`
	// Agents are the subagent files, in path order.
	Agents []*Imported `json:"-"`
	// Skipped are the .md files that are not subagent files (no front matter), with why.
	Skipped []Skipped `json:"skipped"`
}

// Skipped is a file the import passed over.
type Skipped struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Load reads every .md file under root (a .claude/agents directory, searched recursively as
// Claude Code searches it, or one .md file), parses and maps each, and refuses two files of
// one name. defaults are the tools of a file without tools ([ParseDefaultTools]; none
// refuses such a file). Every problem of every file is returned at once, as
// [strictyaml.Errors] with file and line; a set is returned only when there are none.
func Load(root string, defaults []Tool) (*Set, error) {
	files, err := listFiles(root)
	if err != nil {
		return nil, err
	}
	s := &Set{Root: root, Skipped: []Skipped{}}
	var errs strictyaml.Errors
	var total int64
	first := map[string]*Agent{}
	for _, f := range files {
		src, err := readListed(f)
		if err != nil {
			errs = append(errs, strictyaml.Error{File: agenttext.Escape(f.path), Msg: readProblem(err)})
			continue
		}
		if total += int64(len(src)); total > maxTotalBytes {
			return nil, fmt.Errorf("import %s: the subagent files are over %d bytes together", root, maxTotalBytes)
		}
		// A file's name may come from a repository someone else wrote: shown escaped.
		a, skip, err := Parse(agenttext.Escape(f.path), agenttext.Escape(f.rel), src)
		if err != nil {
			errs = append(errs, asErrors(err)...)
			continue
		}
		if skip != "" {
			s.Skipped = append(s.Skipped, Skipped{File: agenttext.Escape(f.rel), Reason: skip})
			continue
		}
		if prev, dup := first[a.Name]; dup {
			errs = append(errs, strictyaml.Error{File: a.File, Line: a.NameLine, Path: "name",
				Msg: fmt.Sprintf("subagent %q is also defined in %s:%d; Claude Code would silently use one of them, agora refuses both", a.Name, prev.File, prev.NameLine)})
			continue
		}
		first[a.Name] = a
		im, merrs := Map(a, defaults)
		if len(merrs) > 0 {
			errs = append(errs, merrs...)
			continue
		}
		s.Agents = append(s.Agents, im)
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	if len(s.Agents) == 0 {
		return nil, fmt.Errorf("import %s: no Claude Code subagent files (.md files opening with YAML front matter) found", root)
	}
	return s, nil
}

// asErrors is err as a list of errors with file and line.
func asErrors(err error) strictyaml.Errors {
	var es strictyaml.Errors
	if errors.As(err, &es) {
		return es
	}
	return strictyaml.Errors{{Msg: err.Error()}}
}

// readProblem says why a file could not be read, without the path (the error names it).
func readProblem(err error) string {
	var tl *capped.TooLargeError
	if errors.As(err, &tl) {
		return fmt.Sprintf("over the %d-byte limit of a subagent file", MaxFileSize)
	}
	if errors.Is(err, errOutside) {
		return err.Error()
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// listed is a file to read: its path as listed, its path under the root, and the directory
// whose files it may resolve to ("" for a root that is one file, which a person named).
type listed struct{ path, rel, within string }

// errOutside means a file is a symlink to a file outside the directory being imported.
var errOutside = errors.New("is a symlink to a file outside the directory given; agora imports only the files the directory holds")

// readListed reads f's file. A symlink is followed only to a file inside f.within: a
// repository's agents directory may not import a file from elsewhere on the host (another
// project's agent, a person's notes). The file is opened non-blocking and must be regular,
// so a FIFO a tarball carried is refused, never waited on.
func readListed(f listed) ([]byte, error) {
	real, err := filepath.EvalSymlinks(f.path)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, err
	}
	if f.within != "" {
		if rel, err := filepath.Rel(f.within, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			return nil, errOutside
		}
	}
	return capped.NoFollow(real, MaxFileSize)
}

// listFiles lists the .md files under root in lexical order; root itself may be one .md file.
// Symlinks to files inside root are followed (when read); symlinked directories are not
// entered.
func listFiles(root string) ([]listed, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if !fi.IsDir() {
		if !strings.HasSuffix(root, ".md") {
			return nil, fmt.Errorf("import %s: want a directory of subagent files or one .md file", root)
		}
		return []listed{{path: root, rel: filepath.Base(root)}}, nil
	}
	within, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if within, err = filepath.Abs(within); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	var out []listed
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		if len(out) == maxFiles {
			return fmt.Errorf("more than %d .md files", maxFiles)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, listed{path: p, rel: filepath.ToSlash(rel), within: within})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", root, err)
	}
	return out, nil
}
