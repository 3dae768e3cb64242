package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

const (
	// maxReadBytes caps what one read_file call returns.
	maxReadBytes = 1 << 20
	// maxWriteBytes caps the content of one write_file call.
	maxWriteBytes = 10 << 20
)

func readFileTool(ws workspace) toolreg.Tool {
	return toolreg.Tool{
		Name: "read_file",
		Description: "Read a text file in the workspace. path is relative to the workspace root. " +
			"At most 1 MiB is returned per call; use offset (bytes) and limit (bytes) to read a larger file in parts.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path":   {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path relative to the workspace root."},
				"offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at (default 0)."},
				"limit":  {"type": "integer", "minimum": 1, "maximum": 1048576, "description": "Most bytes to return (default and maximum 1048576)."}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		ReadOnly: true,
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				Path   string `json:"path"`
				Offset int64  `json:"offset"`
				Limit  int64  `json:"limit"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			return ws.read(a.Path, a.Offset, a.Limit)
		},
	}
}

func (w workspace) read(p string, offset, limit int64) (toolreg.Result, error) {
	const tool = "read_file"
	if limit <= 0 || limit > maxReadBytes {
		limit = maxReadBytes
	}
	root, name, err := w.resolve(tool, p)
	if err != nil {
		return toolreg.Result{}, err
	}
	defer root.Close()
	// O_NONBLOCK: a FIFO planted in the workspace is refused below, not waited on.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return toolreg.Result{}, fsError(tool, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return toolreg.Result{}, fsError(tool, err)
	}
	switch {
	case fi.IsDir():
		return toolreg.Result{}, errors.New(tool + ": is a directory; use list_files")
	case !fi.Mode().IsRegular():
		return toolreg.Result{}, errors.New(tool + ": not a regular file")
	}
	size := fi.Size()
	if offset >= size {
		if offset == 0 {
			return toolreg.Result{Content: ""}, nil
		}
		return toolreg.Result{Content: "[offset " + itoa(offset) + " is at or past the end of the file (" + itoa(size) + " bytes)]"}, nil
	}
	buf := make([]byte, min(limit, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return toolreg.Result{}, fsError(tool, err)
	}
	buf = buf[:n]
	if isBinary(buf) {
		return toolreg.Result{Content: "[binary file: " + itoa(size) + " bytes; not shown]"}, nil
	}
	content := string(buf)
	if end := offset + int64(n); end < size {
		content += "\n[truncated: bytes " + itoa(offset) + "-" + itoa(end) + " of " + itoa(size) +
			" shown; read on with offset " + itoa(end) + "]"
	}
	return toolreg.Result{Content: content}, nil
}

func writeFileTool(ws workspace, learn *LearnWrites) toolreg.Tool {
	return toolreg.Tool{
		Name: "write_file",
		Description: "Create or replace a file in the workspace with the given content (at most 10 MiB). " +
			"path is relative to the workspace root; missing parent directories are created.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path":    {"type": "string", "minLength": 1, "maxLength": 4096, "description": "File path relative to the workspace root."},
				"content": {"type": "string", "description": "The whole new content of the file."}
			},
			"required": ["path", "content"],
			"additionalProperties": false
		}`),
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				Path    string `json:"path"`
				Content string `json:"content"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			res, err := ws.write(a.Path, a.Content)
			var denied *toolreg.DeniedError
			if learn != nil && errors.As(err, &denied) && denied.Reason == ReasonOutsideWorkspace {
				return ws.learnWrite(ctx, learn, a.Path, a.Content, denied)
			}
			return res, err
		},
	}
}

func (w workspace) write(p, content string) (toolreg.Result, error) {
	const tool = "write_file"
	if len(content) > maxWriteBytes {
		return toolreg.Result{}, errors.New(tool + ": content is larger than " + itoa(maxWriteBytes) + " bytes")
	}
	root, name, err := w.resolve(tool, p)
	if err != nil {
		return toolreg.Result{}, err
	}
	defer root.Close()
	if name == "." {
		return toolreg.Result{}, errors.New(tool + ": the path names the workspace root, not a file")
	}
	if grant.InGitDir(name) {
		return toolreg.Result{}, gitDirDenied(tool)
	}
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return toolreg.Result{}, errors.New(tool + ": a component of the path is not a directory")
			}
			return toolreg.Result{}, fsError(tool, err)
		}
	}
	// Create exclusively first, so only a file this call created gets its mode set.
	created := true
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, fs.ErrExist) {
		created = false
		// An existing file, or a link (possibly dangling) that the Root follows only inside.
		// Not truncated yet: where it leads is checked first.
		f, err = root.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if errors.Is(err, fs.ErrNotExist) { // a dangling link: its target is made
			f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
			created = err == nil
		}
	}
	if err != nil {
		return toolreg.Result{}, fsError(tool, err)
	}
	// The name is not the file: a link inside the workspace (one a repository committed)
	// may lead into .git, so judge the file opened, by the kernel's name for it.
	if real, err := w.checkOpened(tool, f); err != nil {
		f.Close()
		if created && real != "" {
			os.Remove(real) // made by this call, through the name or a link
		}
		return toolreg.Result{}, err
	}
	if !created && w.pinned != "" && hardLinked(f) {
		// A learn scratch's file is the scratch's own: one with another name elsewhere (a
		// hard link the agent made to a workspace file, or one outside) would take the
		// learned write there, past the check by name above.
		f.Close()
		return toolreg.Result{}, &toolreg.DeniedError{Tool: tool, Reason: ReasonOutsideWorkspace,
			Hint: "the file has other hard links; a learned write goes only to a file of the scratch directory's own"}
	}
	if !created {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return toolreg.Result{}, fsError(tool, err)
		}
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return toolreg.Result{}, errors.New(tool + ": not a regular file")
	}
	if err == nil && created {
		err = f.Chmod(0o644) // whatever the umask
	}
	if err == nil {
		_, err = io.WriteString(f, content)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return toolreg.Result{}, fsError(tool, err)
	}
	return toolreg.Result{Content: "wrote " + itoa(int64(len(content))) + " bytes to " + filepath.ToSlash(name)}, nil
}

func itoa[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }
