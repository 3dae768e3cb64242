package plan

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

func (v *validator) needs(np, self string, docs map[string]needDoc, ids map[string]int, g *graph) map[string]Need {
	if len(docs) > MaxNeeds {
		v.add(np, "%d inputs; at most %d", len(docs), MaxNeeds)
		return nil
	}
	if len(docs) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(docs))
	needs := make(map[string]Need, len(docs))
	for _, key := range keys {
		n := docs[key]
		kp := np + "." + key
		if !needKeyPattern().MatchString(key) {
			v.add(kp, "invalid input key %q: use 1-63 lowercase letters, digits, '_' or '-', starting with a letter", key)
		}
		v.edge(kp+".from", self, n.From, ids, g)
		if n.Select == "" {
			v.add(kp+".select", "required; want %s, %s, %s or %sPATH", SelectPatch, SelectOutputs, SelectVerify, SelectOutputPrefix)
		} else if err := CheckSelect(n.Select); err != nil {
			v.add(kp+".select", "%v", err)
		}
		needs[key] = Need(n)
	}
	return needs
}

// CheckSelect checks the select of a [Need]: "patch", "outputs", "verify" or "output:PATH", where PATH is
// a clean relative path (no "..", no leading "/", no empty or "." parts) of printable
// characters.
func CheckSelect(sel string) error {
	switch sel {
	case SelectPatch, SelectOutputs, SelectVerify:
		return nil
	}
	p, ok := strings.CutPrefix(sel, SelectOutputPrefix)
	if !ok {
		return fmt.Errorf("want %s, %s, %s or %sPATH, got %q", SelectPatch, SelectOutputs, SelectVerify, SelectOutputPrefix, sel)
	}
	switch {
	case p == "":
		return fmt.Errorf("want %sPATH with a path in the upstream task's outputs, got %q", SelectOutputPrefix, sel)
	case len(p) > MaxOutputPath:
		return fmt.Errorf("output path of %d bytes; at most %d", len(p), MaxOutputPath)
	case !printable(p):
		return fmt.Errorf("output path %q holds a control character or invalid UTF-8", p)
	case path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf(`output path %q must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`, p)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}
