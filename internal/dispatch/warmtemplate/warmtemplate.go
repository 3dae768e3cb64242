// Package warmtemplate is the stored form of a warm target's template (dispatch's
// warmtemplate.go: the shape of its last cold dispatch) and its strict reader. It runs on the
// host, over a file of the host's own that a standby supervisor starts its slot from; it
// imports only [compute] and [strictjson], and lives apart from dispatch so its fuzz target
// builds without dispatch's import graph.
package warmtemplate

import (
	"errors"
	"fmt"
	"os"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/strictjson"
)

// MaxBytes bounds a template file's size: a spec's argv, env and binds.
const MaxBytes = 64 << 10

// Template is the template as stored: the spec without its files (only their number), sinks
// and uid.
type Template struct {
	Argv    []string       `json:"argv"`
	Env     []string       `json:"env"`
	Dir     string         `json:"dir"`
	Network bool           `json:"network"`
	Sandbox string         `json:"sandbox"`
	Limits  compute.Limits `json:"limits"`
	Binds   []compute.Bind `json:"binds"`
	Files   int            `json:"files"`
}

// Spec is the spec t stands for, with Files empty slots.
func (t Template) Spec() compute.Spec {
	return compute.Spec{Argv: t.Argv, Env: t.Env, Dir: t.Dir, Network: t.Network, Sandbox: t.Sandbox,
		Limits: t.Limits, Binds: t.Binds, Files: make([]*os.File, t.Files)}
}

// Parse decodes a stored template exactly (strictjson) and checks what a slot start would
// otherwise trip on late.
func Parse(b []byte) (compute.Spec, error) {
	var t Template
	if err := strictjson.Decode("template", b, MaxBytes, &t); err != nil {
		return compute.Spec{}, err
	}
	if len(t.Argv) == 0 {
		return compute.Spec{}, errors.New("template has no argv")
	}
	if t.Files < 0 || t.Files > 8 {
		return compute.Spec{}, fmt.Errorf("template passes %d files: want 0 to 8", t.Files)
	}
	if t.Sandbox == compute.SandboxNone {
		return compute.Spec{}, errors.New("template of sandbox none: nothing to start ahead")
	}
	return t.Spec(), nil
}
