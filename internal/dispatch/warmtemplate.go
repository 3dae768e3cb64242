package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch/warmtemplate"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A warm target's template is the shape of its last cold dispatch (the spec without its
// files, sinks and uid). The in-process pools keep it in memory (WarmPools.learn); the
// detached supervisors of `orch serve` and `mcp serve` write it to templateFile in the
// target's warm directory, where serve's standby supervisors read it to start their slot.
// The file is the host's own (root's, 0600, in a 0700 directory of AGORA_HOME): no
// sandbox reaches it. It decides no grant either: a standby derives its slot's shape from
// what the file says, and a dispatch runs in the slot only when its own spec has exactly
// that shape, so a file planted with other binds makes slots no dispatch fits.
const templateFile = "template.json"

// maxTemplate bounds a template file's size.
const maxTemplate = warmtemplate.MaxBytes

// warmTemplate is the template as stored.
type warmTemplate = warmtemplate.Template

// templateOf is spec as a template of target's slots: no sinks, no files but their number,
// no uid, and its shape as the ID (the pools' key).
func templateOf(stateDir, target string, spec compute.Spec) compute.Spec {
	tmpl := spec
	tmpl.Stdout, tmpl.Stderr = nil, nil
	tmpl.Files = make([]*os.File, len(spec.Files))
	tmpl.RunAs = nil
	tmpl.ID = compute.SlotShape(tmpl, slotOptions(stateDir, target))
	return tmpl
}

// slotOptions are every warm slot's: /agora and the system trust store come at claim, and
// AGORA_DISPATCH_ID (which the worker never reads: the agent's copy comes from the bundle's
// manifest) is not in the slot.
// The worker is started ahead in the slot (prewarmed) and waits on its claim pipe
// (wire.ClaimFDEnv) until the claim has attached the dispatch's files.
func slotOptions(stateDir, target string) compute.WarmOptions {
	return compute.WarmOptions{Dir: filepath.Join(stateDir, warmDir, target), ClaimRoot: wire.DefaultRoot,
		PerDispatchEnv: []string{"AGORA_DISPATCH_ID"}, PrestartEnv: wire.ClaimFDEnv, ClaimFiles: claimFiles}
}

// claimFiles are the places outside /agora whose file a warm slot gets at the claim: the
// system trust store, over which a dispatch with the egress proxy binds its stage's trust
// file (startNetwork). Its source is per dispatch; as a fixed bind of the shape it would make
// every proxy dispatch miss its slot and start cold.
var claimFiles = []string{wire.SystemTrustFile}

// saveTemplate writes spec, a cold dispatch's, as target's template for standby supervisors,
// when target keeps warm slots and this process could hold one (root; any user for a
// kubernetes target, whose pool's pods are the controller's). Unchanged templates
// are not rewritten: a target's dispatches mostly share one shape.
func (d *Dispatcher) saveTemplate(target string, t config.Target, spec compute.Spec) {
	if !(warmTarget(t) || warmDockerTarget(t) || warmPoolTarget(t)) || (os.Geteuid() != 0 && !warmPoolTarget(t)) || spec.Sandbox == compute.SandboxNone || holdsToken(spec.Env) {
		return
	}
	if err := writeTemplate(d.StateDir, target, spec); err != nil {
		d.log().Warn("warm slots: save the target's template", "target", target, "err", err)
	}
}

func writeTemplate(stateDir, target string, spec compute.Spec) error {
	b, err := json.Marshal(warmTemplate{Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Network: spec.Network,
		Sandbox: spec.Sandbox, Limits: spec.Limits, Binds: spec.Binds, Files: len(spec.Files)})
	if err != nil {
		return err
	}
	dir := filepath.Join(stateDir, warmDir, target)
	path := filepath.Join(dir, templateFile)
	if old, err := readTemplateBytes(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".template-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func readTemplateBytes(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTemplate+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTemplate {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxTemplate)
	}
	return b, nil
}

// ErrNoTemplate means a warm target has had no cold dispatch yet to learn its shape from.
var ErrNoTemplate = errors.New("no cold dispatch of the target yet: its warm slots learn their shape from one")

// readTemplate returns target's stored template, its shape in ID.
func readTemplate(stateDir, target string) (compute.Spec, error) {
	b, err := readTemplateBytes(filepath.Join(stateDir, warmDir, target, templateFile))
	if errors.Is(err, os.ErrNotExist) {
		return compute.Spec{}, ErrNoTemplate
	}
	if err != nil {
		return compute.Spec{}, fmt.Errorf("warm template of target %q: %w", target, err)
	}
	spec, err := warmtemplate.Parse(b)
	if err != nil {
		return compute.Spec{}, fmt.Errorf("warm template of target %q: %w", target, err)
	}
	return templateOf(stateDir, target, spec), nil
}

// WarmShape returns the shape of target's standby slots now (the key serve claims them by),
// or an error wrapping [ErrNoTemplate] before its first cold dispatch.
func WarmShape(stateDir, target string) (string, error) {
	t, err := readTemplate(stateDir, target)
	if err != nil {
		return "", err
	}
	return t.ID, nil
}
