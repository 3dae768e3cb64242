package dispatch

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// The input key and directory patterns, compiled on first use (no work at init).
var (
	inputKeyPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`) })
	inputDirPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) }) // a fan-out item's key
)

// Limits of one dispatch's inputs. Every input file is listed in the dispatch's canonical
// manifest, which `agora verify` reads only up to 1 MiB: with a dispatch's own outputs
// (wire.MaxOutputNames of names) these keep the manifest of an honest dispatch under it
// whatever its upstreams left, so no run can become unverifiable by its fan-in.
const (
	maxInputs          = 64
	maxInputFiles      = 1024
	maxInputNamesBytes = 192 << 10
)

// PatchFile is the name of a patch input under /agora/inputs/<key>.
const PatchFile = "patch.diff"

// resolveInputs turns input specs into the files to mount, read from the upstream records:
// only a finished dispatch has products, and only the ones it recorded.
func (d *Dispatcher) resolveInputs(ctx context.Context, specs []InputSpec) ([]Input, error) {
	var out []Input
	seen := map[string]bool{}   // key and dir
	keys := map[string]string{} // key -> "" (one product) or "dir" (products under dirs)
	files, names := 0, 0
	applied := false
	for _, s := range specs {
		if !inputKeyPattern().MatchString(s.Key) {
			return nil, fmt.Errorf("input key %q is not valid (want %s)", s.Key, inputKeyPattern())
		}
		if s.Dir != "" && !inputDirPattern().MatchString(s.Dir) {
			return nil, fmt.Errorf("input %q: dir %q is not valid (want %s)", s.Key, s.Dir, inputDirPattern())
		}
		kind, known := keys[s.Key]
		switch {
		case seen[s.Key+"/"+s.Dir]:
			if s.Dir != "" {
				return nil, fmt.Errorf("input %q: dir %q named twice", s.Key, s.Dir)
			}
			return nil, fmt.Errorf("input key %q named twice", s.Key)
		case known && (kind == "") != (s.Dir == ""):
			return nil, fmt.Errorf("input key %q names one product and products under dirs", s.Key)
		case !known && len(keys) == maxInputs:
			return nil, fmt.Errorf("more than %d input keys", maxInputs)
		}
		if s.Dir != "" {
			kind = "dir"
		}
		keys[s.Key], seen[s.Key+"/"+s.Dir] = kind, true
		up, err := d.Records.Get(ctx, s.FromDispatch)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", s.Key, err)
		}
		// A learn dispatch's products were made under a grant nobody enforced: no hand-off.
		if err := handOffRefusal(up); err != nil {
			return nil, fmt.Errorf("input %q: %w", s.Key, err)
		}
		red := up.State == lifecycle.DispatchFailed && up.Reason == lifecycle.ReasonVerifyFailed
		if up.Result == nil || (up.State != lifecycle.DispatchFinished && !(red && (s.Apply || s.Select == "verify"))) {
			// A dispatch whose verify gate was red keeps its patch and its verdict: a fix
			// applies the one and reads the other.
			return nil, fmt.Errorf("input %q: dispatch %s is %s; only a finished dispatch has products", s.Key, up.ID, up.State)
		}
		if s.Apply && (s.Select != "patch" || s.Dir != "" || applied) {
			return nil, fmt.Errorf("input %q: only one patch input, not under a dir, can be applied to the workspace", s.Key)
		}
		if s.Stack && (s.Select != "patch" || s.Dir == "" || s.Apply) {
			return nil, fmt.Errorf("input %q: a stack input is a patch under a dir of its own (its task), never applied by the worker", s.Key)
		}
		applied = applied || s.Apply
		in := Input{Key: s.Key, Select: s.Select, FromDispatch: up.ID, Files: []InputFile{}, Dir: s.Dir, Apply: s.Apply, Stack: s.Stack}
		switch {
		case s.Select == "patch":
			f := InputFile{Path: PatchFile, Digest: digest.Digest(emptyDigest), Size: 0}
			if p := up.Result.Patch; p != nil {
				f.Digest, f.Size = p.Digest, p.Size
			} else if _, err := d.Blobs.Put(nil); err != nil {
				return nil, err
			}
			in.Files = append(in.Files, f)
		case s.Select == "outputs":
			for _, o := range up.Result.Outputs {
				in.Files = append(in.Files, InputFile{Path: o.Path, Digest: o.Digest, Size: o.Size})
			}
		case s.Select == "verify":
			files, err := d.verdictFiles(up)
			if err != nil {
				return nil, fmt.Errorf("input %q: %w", s.Key, err)
			}
			in.Files = files
		case strings.HasPrefix(s.Select, "output:"):
			want := strings.TrimPrefix(s.Select, "output:")
			var found *Output
			for i, o := range up.Result.Outputs {
				if o.Path == want {
					found = &up.Result.Outputs[i]
				}
			}
			if found == nil {
				return nil, fmt.Errorf("input %q: dispatch %s left no output %q", s.Key, up.ID, want)
			}
			in.Files = append(in.Files, InputFile{Path: path.Base(found.Path), Digest: found.Digest, Size: found.Size})
		default:
			return nil, fmt.Errorf("input %q: select %q is not patch, outputs, verify or output:PATH", s.Key, s.Select)
		}
		for _, f := range in.Files {
			if !safeRel(f.Path) {
				return nil, fmt.Errorf("input %q: unsafe path %q", s.Key, f.Path)
			}
			files, names = files+1, names+len(s.Dir)+len(f.Path)
		}
		if files > maxInputFiles || names > maxInputNamesBytes {
			return nil, fmt.Errorf("inputs: %d files with %d bytes of names, over the limit of %d files and %d bytes "+
				"(select fewer products: output:PATH instead of outputs)", files, names, maxInputFiles, maxInputNamesBytes)
		}
		out = append(out, in)
	}
	return out, nil
}

// emptyDigest is the SHA-256 of no bytes: the patch of a dispatch that changed nothing.
const emptyDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// safeRel reports whether p is a clean relative path that stays below its root.
func safeRel(p string) bool {
	return p != "" && !path.IsAbs(p) && path.Clean(p) == p && p != "." && !strings.HasPrefix(p, "../")
}

// stageInputs writes every input's files, re-verified from the blob store, under dir.
func (d *Dispatcher) stageInputs(inputs []Input, dir string) error {
	for _, in := range inputs {
		for _, f := range in.Files {
			if !safeRel(f.Path) {
				return fmt.Errorf("input %q: unsafe path %q", in.Key, f.Path)
			}
			b, err := d.Blobs.Get(f.Digest, 0)
			if err != nil {
				return fmt.Errorf("input %q: %s: %w", in.Key, f.Path, err)
			}
			if in.Dir != "" && !inputDirPattern().MatchString(in.Dir) {
				return fmt.Errorf("input %q: unsafe dir %q", in.Key, in.Dir)
			}
			dst := filepath.Join(dir, in.Key, in.Dir, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(dst, b, 0o400); err != nil {
				return err
			}
		}
	}
	return nil
}

// Files of a verify input (select "verify"), under /agora/inputs/<key>/.
const (
	VerdictFile       = "verify.json" // the verdict's audit form (RFC 8785): its digest is the verdict's
	VerdictOutputFile = "output.txt"  // the output tail the verdict kept: its SHA-256 is the verdict's output_sha256
)

// verdictFiles stores up's verdict as the two files of a verify input: verify.json, whose
// digest is the verdict digest up's terminal entry and manifest name, and output.txt, whose
// digest is the output_sha256 its dispatch.verified entry records. So agora verify binds both
// to the upstream's own record without reading them.
func (d *Dispatcher) verdictFiles(up *Record) ([]InputFile, error) {
	v := up.Verdict
	if v == nil {
		return nil, fmt.Errorf("dispatch %s has no verify gate verdict", up.ID)
	}
	form, err := jcs.Marshal(v.Details())
	if err != nil {
		return nil, err
	}
	var files []InputFile
	for _, f := range []struct {
		name string
		b    []byte
	}{{VerdictFile, form}, {VerdictOutputFile, []byte(v.OutputTail)}} {
		dg, err := d.Blobs.Put(f.b)
		if err != nil {
			return nil, err
		}
		files = append(files, InputFile{Path: f.name, Digest: dg, Size: int64(len(f.b))})
	}
	if string(files[0].Digest) != v.Digest() {
		return nil, fmt.Errorf("dispatch %s: its verdict's form does not hash to its digest", up.ID)
	}
	return files, nil
}
