//go:build ignore

// toolsalign keeps the test tools' modules (scripts/*-tools) compiling a package they share
// once, not once per module. Their builds use -trimpath, and under -trimpath Go's build cache
// keys a package by its module's version as the main module requires it, not by the version
// a replace directive brings in: golang.org/x/net required at v0.58.0 and replaced to v0.51.0
// compiles again, with everything above it, though its files are v0.51.0's. So two modules
// that build the same content of a module must also require it at the same version.
//
//	go run scripts/toolsalign.go        check: list every module whose content is shared
//	                                    under two versions, exit 1 if there is one
//	go run scripts/toolsalign.go -w     require each at the highest of those versions, replaced
//	                                    to its content, in every tools module that builds it,
//	                                    then go mod tidy there (it needs the module proxy)
//
// Only what each go.mod says is read: after go mod tidy it lists every module that provides
// a package at its selected version, so the check needs no network.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// use is one module as one tools module builds it: the version it requires (what the build
// cache sees) and the content a replace directive gives it (path@version; the same as the
// required one without a replace).
type use struct {
	dir, version, content string
}

// mismatch is a module whose one content two or more tools modules require at different versions.
type mismatch struct {
	path, content, target string
	uses                  []use
}

func main() {
	write := flag.Bool("w", false, "rewrite the go.mod files (then go mod tidy in each) instead of checking")
	root := flag.String("C", ".", "the repository's root")
	flag.Parse()
	ms, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolsalign:", err)
		os.Exit(2)
	}
	if len(ms) == 0 {
		fmt.Println("toolsalign: every module shared by the tools modules has one version for one content")
		return
	}
	if !*write {
		for _, m := range ms {
			var at []string
			for _, u := range m.uses {
				at = append(at, fmt.Sprintf("%s in %s", u.version, filepath.Base(u.dir)))
			}
			fmt.Printf("%s (content %s): %s\n", m.path, m.content, strings.Join(at, ", "))
		}
		fmt.Fprintf(os.Stderr, "toolsalign: %d of the shared modules are built from one content under two or more versions, so Go's build cache compiles them (and every package above them) once per version; run: go run scripts/toolsalign.go -w\n", len(ms))
		os.Exit(1)
	}
	if err := fix(ms); err != nil {
		fmt.Fprintln(os.Stderr, "toolsalign:", err)
		os.Exit(2)
	}
	if ms, err = check(*root); err != nil || len(ms) > 0 {
		fmt.Fprintf(os.Stderr, "toolsalign: %d mismatches left after go mod tidy (%v): a module's own requirement may be above the content's version; replace that module too\n", len(ms), err)
		os.Exit(1)
	}
	fmt.Println("toolsalign: aligned")
}

// check reads every scripts/*-tools/go.mod and returns the mismatches, by module path.
func check(root string) ([]mismatch, error) {
	files, err := filepath.Glob(filepath.Join(root, "scripts", "*-tools", "go.mod"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no scripts/*-tools/go.mod under %s", root)
	}
	byPath := map[string][]use{}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			u := use{dir: filepath.Dir(name), version: r.Mod.Version, content: r.Mod.Path + "@" + r.Mod.Version}
			// A replace of this very version wins over one of every version, as in Go.
			var replace *modfile.Replace
			for _, rp := range f.Replace {
				if rp.Old.Path == r.Mod.Path && (rp.Old.Version == r.Mod.Version || rp.Old.Version == "" && replace == nil) {
					replace = rp
				}
			}
			switch {
			case replace == nil:
			case replace.New.Version == "":
				u.content = "" // a directory: its own content, shared with no one
			default:
				u.content = replace.New.Path + "@" + replace.New.Version
			}
			if u.content != "" {
				byPath[r.Mod.Path] = append(byPath[r.Mod.Path], u)
			}
		}
	}
	var out []mismatch
	for path, uses := range byPath {
		byContent := map[string][]use{}
		for _, u := range uses {
			byContent[u.content] = append(byContent[u.content], u)
		}
		for content, us := range byContent {
			target := us[0].version
			same := true
			for _, u := range us[1:] {
				if u.version != target {
					same = false
				}
				if semver.Compare(u.version, target) > 0 {
					target = u.version
				}
			}
			if !same {
				slices.SortFunc(us, func(a, b use) int { return cmp.Compare(a.dir, b.dir) })
				out = append(out, mismatch{path: path, content: content, target: target, uses: us})
			}
		}
	}
	slices.SortFunc(out, func(a, b mismatch) int { return cmp.Compare(a.path, b.path) })
	return out, nil
}

// fix requires each mismatch at its highest version and replaces it to its content in every
// tools module that builds that content, then tidies each module it changed.
func fix(ms []mismatch) error {
	changed := map[string][]string{} // dir -> go mod edit flags
	for _, m := range ms {
		newPath, newVersion, _ := strings.Cut(m.content, "@")
		for _, u := range m.uses {
			if u.version == m.target {
				continue
			}
			// Versioned replaces of the old and the new version go (the new one's would win
			// over the replace of every version), then the one content is the replace of all.
			changed[u.dir] = append(changed[u.dir],
				"-require="+m.path+"@"+m.target,
				"-dropreplace="+m.path+"@"+u.version,
				"-dropreplace="+m.path+"@"+m.target,
				"-replace="+m.path+"="+newPath+"@"+newVersion)
		}
	}
	dirs := make([]string, 0, len(changed))
	for d := range changed {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		for _, args := range [][]string{append([]string{"mod", "edit"}, changed[d]...), {"mod", "tidy"}} {
			cmd := exec.Command("go", args...)
			cmd.Dir = d
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("go %s in %s: %w", args[1], d, err)
			}
		}
		fmt.Printf("toolsalign: %s: %d modules aligned\n", filepath.Base(d), len(changed[d])/4)
	}
	return nil
}
