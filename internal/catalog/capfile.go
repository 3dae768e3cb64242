package catalog

import (
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// CapabilityFile is the name of the optional grant declaration inside a capability directory.
const CapabilityFile = "capability.yaml"

// maxCapabilityFileSize caps capability.yaml.
const maxCapabilityFileSize = 256 << 10

// CapabilityDoc is capability.yaml, all of it: the [grant.Set] a capability declares, with its description,
// setup script and network mode. Everything absent is denied. Its JSON (the catalog's stored
// metadata) keeps the file's field order.
type CapabilityDoc struct {
	Description string `yaml:"description" json:"description,omitempty"`
	grant.Set   `yaml:",inline"`
	Setup       string `yaml:"setup" json:"setup,omitempty"`
	Network     string `yaml:"network" json:"network"` // "none" (default) or "egress"
	// Overlay names the files that are also placed in the workspace (see [OverlayFiles]);
	// every file is mounted read-only at /agora/capabilities/NAME.
	Overlay []string `yaml:"overlay" json:"overlay,omitempty"`
}

// ParseCapabilityDoc reads capability.yaml (file names it in messages) and the archive's file list,
// and checks everything it declares. Every problem is reported at once.
func ParseCapabilityDoc(file string, src []byte, files []File) (CapabilityDoc, error) {
	var g CapabilityDoc
	if len(src) > maxCapabilityFileSize {
		return g, fmt.Errorf("%s is larger than %d bytes", file, maxCapabilityFileSize)
	}
	pos, err := strictyaml.Decode(file, src, &g)
	// Keep checking what did decode, so every problem is reported at once.
	errs, ok := strictyaml.Collect(err)
	if !ok {
		return g, err
	}
	seen := map[string]bool{}
	for i, t := range g.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		switch {
		case !grant.IsBuiltinTool(t):
			errs = append(errs, pos.Errorf(p, "unknown tool %q; known tools: %s", t, strings.Join(grant.BuiltinTools, ", ")))
		case seen[t]:
			errs = append(errs, pos.Errorf(p, "tool %q listed twice", t))
		}
		seen[t] = true
	}
	for i, c := range g.Commands {
		if _, err := grant.ParseCommandPattern(c); err != nil {
			errs = append(errs, pos.Errorf(fmt.Sprintf("commands[%d]", i), "%v", err))
		}
	}
	for i, r := range g.Egress {
		p := fmt.Sprintf("egress[%d]", i)
		if reported(errs, p) {
			continue // the string form did not parse: said once, by the decoder
		}
		// A mapping decodes field by field: clean it as the string form is.
		g.Egress[i] = r.Clean()
		if err := g.Egress[i].Validate(); err != nil {
			errs = append(errs, pos.Errorf(p, "%v", err))
		}
	}
	if len(g.Approve) > 256 {
		errs = append(errs, pos.Errorf("approve", "%d rules; at most 256", len(g.Approve)))
	}
	for i, r := range g.Approve {
		p := fmt.Sprintf("approve[%d]", i)
		if reported(errs, p) {
			continue // the string form did not parse: said once, by the decoder
		}
		if err := r.Validate(); err != nil {
			errs = append(errs, pos.Errorf(p, "%v", err))
		}
	}
	switch g.Network {
	case "":
		g.Network = "none"
	case "none", "egress":
	default:
		errs = append(errs, pos.Errorf("network", `want "none" or "egress", got %q`, g.Network))
	}
	if len(g.Overlay) > maxOverlayPatterns {
		errs = append(errs, pos.Errorf("overlay", "%d patterns; at most %d", len(g.Overlay), maxOverlayPatterns))
	}
	for i, p := range g.Overlay {
		if err := CheckOverlayPattern(p); err != nil {
			errs = append(errs, pos.Errorf(fmt.Sprintf("overlay[%d]", i), "%v", err))
		}
	}
	if g.Setup != "" {
		if f, ok := findFile(files, g.Setup); !ok {
			errs = append(errs, pos.Errorf("setup", "setup script %q is not a file in the capability", g.Setup))
		} else if f.LinkTarget != "" {
			errs = append(errs, pos.Errorf("setup", "setup script %q is a symlink; name the file itself", g.Setup))
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return g, errs
	}
	g.Tools = nonNil(g.Tools)
	g.Commands = nonNil(g.Commands)
	if g.Egress == nil {
		g.Egress = []grant.EgressRule{}
	}
	return g, nil
}

func findFile(files []File, p string) (File, bool) {
	for _, f := range files {
		if f.Path == p {
			return f, true
		}
	}
	return File{}, false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// reported reports whether errs already holds an error at path.
func reported(errs strictyaml.Errors, path string) bool {
	for _, e := range errs {
		if e.Path == path {
			return true
		}
	}
	return false
}
