package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/toolreg"
)

const (
	// defaultSearchResults and maxSearchResults bound the matching lines one call returns.
	defaultSearchResults = 100
	maxSearchResults     = 1000
	// maxSearchFileBytes skips files larger than this.
	maxSearchFileBytes = 4 << 20
	// maxSearchFiles and maxSearchTotalBytes bound the files and bytes one call reads.
	maxSearchFiles      = 20000
	maxSearchTotalBytes = 256 << 20
	// maxMatchLineBytes cuts a long matching line in the output.
	maxMatchLineBytes = 300
)

func searchFilesTool(ws workspace) toolreg.Tool {
	return toolreg.Tool{
		Name: "search_files",
		Description: "Search the text files of the workspace for lines matching a regular expression (RE2 syntax, " +
			"as in Go). Prints path:line: text for each match. path limits the search to a directory or one file. " +
			"Binary files, files over 4 MiB, .git and symbolic links are skipped.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"pattern":     {"type": "string", "minLength": 1, "maxLength": 1024, "description": "RE2 regular expression matched against each line."},
				"path":        {"type": "string", "maxLength": 4096, "description": "Directory or file relative to the workspace root (default: the root)."},
				"max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most matching lines to return (default 100)."}
			},
			"required": ["pattern"],
			"additionalProperties": false
		}`),
		ReadOnly: true,
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				Pattern    string `json:"pattern"`
				Path       string `json:"path"`
				MaxResults int    `json:"max_results"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			return ws.search(ctx, a.Pattern, a.Path, a.MaxResults)
		},
	}
}

func (w workspace) search(ctx context.Context, pattern, p string, maxResults int) (toolreg.Result, error) {
	const tool = "search_files"
	re, err := regexp.Compile(pattern)
	if err != nil {
		// The message names the rule broken; *syntax.Error would also repeat the pattern.
		var se *syntax.Error
		if errors.As(err, &se) {
			return toolreg.Result{}, errors.New(tool + ": invalid pattern: " + string(se.Code))
		}
		return toolreg.Result{}, errors.New(tool + ": invalid pattern")
	}
	if maxResults <= 0 || maxResults > maxSearchResults {
		maxResults = defaultSearchResults
	}
	root, name, fi, err := w.stat(tool, p)
	if err != nil {
		return toolreg.Result{}, err
	}
	defer root.Close()
	s := searcher{root: root, re: re, max: maxResults}
	if !fi.IsDir() {
		s.file(name)
	} else {
		err = fs.WalkDir(root.FS(), name, func(p string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			switch {
			case err != nil:
				if p == name {
					return err
				}
				return nil
			case d.IsDir():
				if p != name && skipDirs[d.Name()] {
					return fs.SkipDir
				}
				return nil
			case !d.Type().IsRegular():
				return nil // symbolic links, devices, pipes
			}
			if s.files == maxSearchFiles || s.read >= maxSearchTotalBytes {
				s.stopped = true
				return fs.SkipAll
			}
			if !s.file(p) {
				return fs.SkipAll
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
	return toolreg.Result{Content: s.report()}, nil
}

// searcher collects matches across files.
type searcher struct {
	root    *os.Root
	re      *regexp.Regexp
	max     int
	out     []string
	files   int
	read    int64 // bytes read so far
	skipped int   // files too large
	capped  bool  // max results reached
	stopped bool  // maxSearchFiles or maxSearchTotalBytes reached
}

// file searches one file; it returns false once no more results are wanted.
func (s *searcher) file(p string) bool {
	s.files++
	f, err := s.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return true
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return true
	}
	if fi.Size() > maxSearchFileBytes {
		s.skipped++
		return true
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSearchFileBytes+1))
	s.read += int64(len(data))
	if err != nil || len(data) > maxSearchFileBytes || isBinary(data) {
		return true
	}
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if !s.re.Match(line) {
			continue
		}
		if len(s.out) == s.max {
			s.capped = true
			return false
		}
		text := string(line)
		if len(text) > maxMatchLineBytes {
			text = strings.ToValidUTF8(text[:maxMatchLineBytes], "") + "…"
		}
		s.out = append(s.out, displayPath(p)+":"+itoa(n)+": "+text)
	}
	return true
}

func (s *searcher) report() string {
	var b strings.Builder
	if len(s.out) == 0 {
		b.WriteString("[no matches]")
	}
	b.WriteString(strings.Join(s.out, "\n"))
	if s.capped {
		b.WriteString("\n[results capped at " + itoa(s.max) + " matches]")
	}
	if s.skipped > 0 {
		b.WriteString("\n[skipped " + itoa(s.skipped) + " files over " + itoa(maxSearchFileBytes) + " bytes]")
	}
	if s.stopped {
		b.WriteString("\n[stopped after reading " + itoa(s.files) + " files (" + itoa(s.read) + " bytes); narrow the path]")
	}
	return b.String()
}
