package codexadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
)

// A learn dispatch's codex patch outside the workspace (docs/learn.md, "Files written outside
// the workspace"). Codex applies a patch itself, from the call in the model's answer, so the
// relay's gate learns it there: each path of an apply_patch call that leaves the workspace
// (not .git) is recorded as file.would_deny (reporter worker) and rewritten into the scratch
// directory in every event codex reads the call from, before codex reads it; an Update File's
// or Delete File's original is copied into the scratch first, so the patch applies to the
// copy. The streamed pieces of a patch (its input deltas and .done events, which codex only
// displays) are dropped: they would carry the path as the model wrote it. The check of what
// codex changed accepts a path in the scratch directory (resolved: a link planted there
// leading out is still a change outside).

// maxLearnOriginal bounds an original copied into the scratch directory; a larger one is not
// copied, and codex's update of the missing copy fails (nothing outside changes).
const maxLearnOriginal = 8 << 20

// codexPatches learns a learn dispatch's patches.
type codexPatches struct {
	scratch *builtin.Scratch
	dir     string // the workspace

	mu   sync.Mutex
	done map[string]string // call id and patch -> the patch codex reads
}

// patchHeaders are the headers of Codex's patch format that name a path, and the op a
// file.would_deny records for each.
var patchHeaders = [...]struct{ prefix, op string }{
	{"*** Add File: ", "write"},
	{"*** Update File: ", "edit"},
	{"*** Delete File: ", "delete"},
	{"*** Move to: ", "move"},
}

// learnPatch returns patch with each path outside the workspace rewritten into the scratch
// directory, recording each first (record); the same call's same patch is learned once, so
// every event carrying it reads the same. Only a header written exactly as Codex writes it is
// learned; any other path is left as it is for the gate to judge (and refuse) as ever.
func (p *codexPatches) learnPatch(callID, patch string, record func(path, op string) error) (string, error) {
	key := callID + "\x00" + patch
	p.mu.Lock()
	out, ok := p.done[key]
	p.mu.Unlock()
	if ok {
		return out, nil
	}
	lines := strings.SplitAfter(patch, "\n")
	for i, line := range lines {
		body := strings.TrimSuffix(line, "\n")
		for _, h := range patchHeaders {
			path, ok := strings.CutPrefix(body, h.prefix)
			if !ok {
				continue
			}
			abs, name, ok := p.learnable(path)
			if !ok {
				break
			}
			if err := record(path, h.op); err != nil {
				return "", err
			}
			if h.op == "edit" || h.op == "delete" {
				p.copyOriginal(abs)
			}
			lines[i] = h.prefix + filepath.Join(p.scratch.Dir(), name) + strings.TrimPrefix(line, body)
			break
		}
	}
	out = strings.Join(lines, "")
	p.mu.Lock()
	if p.done == nil {
		p.done = map[string]string{}
	}
	p.done[key] = out
	p.mu.Unlock()
	return out, nil
}

// rewritten is the patch codex reads for call id's patch, once learnPatch has learned it.
func (p *codexPatches) rewritten(callID, patch string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out, ok := p.done[callID+"\x00"+patch]
	return out, ok && out != patch
}

// learnable says whether path, as a patch header names it, is a write outside the workspace a
// learn dispatch learns, and returns it absolute and its name in the scratch directory. Not
// learned: a path inside the workspace (by its name or its resolved one), into .git, or one
// that cannot be recorded whole (not clean text, a control character, over 1,024 bytes).
func (p *codexPatches) learnable(path string) (abs, name string, ok bool) {
	if path == "" || path != strings.TrimSpace(path) || len(path) > 1024 || !utf8.ValidString(path) ||
		strings.IndexFunc(path, unicode.IsControl) >= 0 {
		return "", "", false
	}
	switch outsideWorkspace(p.dir, path) {
	case "a changed file is outside the workspace", "a changed file resolves outside the workspace through a symlink":
	default:
		return "", "", false
	}
	abs = path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(p.dir, abs)
	} else if real, err := filepath.EvalSymlinks(p.dir); err != nil || resolvesUnder(real, abs) {
		// The workspace by its resolved name: refused as ever (give it relative), as
		// write_file's learn does.
		return "", "", false
	}
	abs = filepath.Clean(abs)
	name = strings.TrimPrefix(abs, "/")
	if name == "" || !filepath.IsLocal(name) {
		return "", "", false
	}
	return abs, name, true
}

// resolvesUnder reports whether p (clean, absolute) is root or under it, by name.
func resolvesUnder(root, p string) bool {
	rel, err := filepath.Rel(root, filepath.Clean(p))
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// copyOriginal copies the regular file at abs (as the sandbox sees it) into the scratch
// directory, so an update or delete applies to the copy. A file that is not regular (a FIFO
// must not block the gate), too large or unreadable is not copied.
func (p *codexPatches) copyOriginal(abs string) {
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if pseudoFS(f) {
		// /proc/self/environ and the like, by name or through a link: the worker is
		// non-dumpable so the agent cannot read its /proc entries (its initial environment
		// keeps the tokens it unset); copying one out would hand them over.
		return
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxLearnOriginal {
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLearnOriginal+1))
	if err != nil || len(b) > maxLearnOriginal {
		return
	}
	_, _ = p.scratch.WriteFile(abs, string(b))
}

// inScratch reports whether path (absolute, or relative to the workspace), every link
// resolved, is inside the scratch directory.
func (p *codexPatches) inScratch(path string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	rel, ok := agentrun.ResolvedRel(p.scratch.Dir(), path)
	return ok && rel != "."
}

// learnCodexPatch learns c's patch (a learn dispatch's apply_patch call) and returns the
// paths the gate judges: those of the patch codex will read.
func (a *codexAudit) learnCodexPatch(c modelCall) ([]string, error) {
	patch, err := a.patches.learnPatch(c.ID, *c.Patch, func(path, op string) error {
		err := a.gw.ReportFile(a.ctx, agentrun.FileReport{Tool: codexPatchTool, Path: path, Op: op, Reason: agentrun.RefusalOutsideWorkspace, CallID: agentrun.AuditCallID(c.ID)})
		if err != nil {
			return a.refuse(c, nil, "its file.would_deny could not be recorded", "a learn dispatch's patch could not be recorded: "+err.Error())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return patchPaths(patch), nil
}

// rewritten returns ev as codex is to read it in a learn dispatch: an apply_patch call's patch
// replaced by the one learned (in the event's item and in a response's output), and the
// streamed pieces of a patch dropped (nil). payload is ev's data, already read exactly.
func (g *callGate) rewritten(ev, payload []byte) ([]byte, string) {
	var root map[string]any
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		return nil, "the model's answer holds an event agora cannot read exactly"
	}
	typ, _ := root["type"].(string)
	switch typ {
	case "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done":
		return nil, "" // custom tool calls are apply_patch's alone (any other is refused)
	case "response.function_call_arguments.delta", "response.function_call_arguments.done":
		if id, _ := root["item_id"].(string); g.patchItems[id] {
			return nil, ""
		}
		return ev, ""
	}
	var items []map[string]any
	if it, ok := root["item"].(map[string]any); ok {
		items = append(items, it)
	}
	if r, ok := root["response"].(map[string]any); ok {
		out, _ := r["output"].([]any)
		for _, o := range out {
			if it, ok := o.(map[string]any); ok {
				items = append(items, it)
			}
		}
	}
	changed := false
	for _, it := range items {
		if name, _ := it["name"].(string); name != codexPatchTool {
			continue
		}
		callID, _ := it["call_id"].(string)
		switch it["type"] {
		case "custom_tool_call":
			if in, ok := it["input"].(string); ok {
				if out, ok := g.rewrite(callID, in); ok {
					it["input"], changed = out, true
				}
			}
		case "function_call":
			if id, ok := it["id"].(string); ok {
				if g.patchItems == nil {
					g.patchItems = map[string]bool{}
				}
				g.patchItems[id] = true
			}
			raw, _ := it["arguments"].(string)
			var args map[string]any
			ad := json.NewDecoder(strings.NewReader(raw))
			ad.UseNumber()
			if raw == "" || ad.Decode(&args) != nil {
				continue
			}
			if in, ok := args["input"].(string); ok {
				if out, ok := g.rewrite(callID, in); ok {
					args["input"] = out
					b, err := marshalPlain(args)
					if err != nil {
						return nil, "a learned patch could not be written back"
					}
					it["arguments"], changed = string(b), true
				}
			}
		}
	}
	if !changed {
		return ev, ""
	}
	b, err := marshalPlain(root)
	if err != nil {
		return nil, "a learned patch could not be written back"
	}
	// The event's other lines (its name, an id) stay; its data lines become the one line.
	var out []byte
	for _, line := range bytes.SplitAfter(bytes.TrimPrefix(ev, []byte("\xef\xbb\xbf")), []byte("\n")) {
		t := bytes.TrimRight(line, "\r\n")
		if name, _, _ := bytes.Cut(t, []byte(":")); len(t) == 0 || string(name) == "data" {
			continue
		}
		out = append(append(out, t...), '\n')
	}
	return fmt.Appendf(out, "data: %s\n\n", b), ""
}

// marshalPlain is json.Marshal without HTML escaping, on one line.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if bytes.IndexByte(b, '\n') >= 0 {
		return nil, errors.New("marshal: a line break")
	}
	return b, nil
}

// pseudoFS reports whether f is on a kernel pseudo file system (proc, sys and their kin), or
// where it is cannot be told: such a file is never copied into the scratch directory.
func pseudoFS(f *os.File) bool {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return true
	}
	switch uint64(st.Type) {
	case 0x9fa0, // proc
		0x62656572, // sysfs
		0x64626720, // debugfs
		0x73636673, // securityfs
		0x74726163, // tracefs
		0x27e0eb,   // cgroup
		0x63677270, // cgroup2
		0xcafe4a11, // bpf
		0x62656570, // configfs
		0xde5e81e4, // efivarfs
		0x1cd1:     // devpts
		return true
	}
	return false
}
