package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// CgroupProbe is what a provider could do with cgroup v2 here, as `agora doctor` reports it.
type CgroupProbe struct {
	// Parent is the cgroup v2 directory task cgroups would be created under, "" when this
	// process is in no cgroup v2 hierarchy.
	Parent string
	// Writable says whether this process may create task cgroups under Parent.
	Writable bool
	// Delegated lists the controllers Parent enables for its children
	// (cgroup.subtree_control); memory.max and pids.max need "memory" and "pids".
	Delegated []string
	// Available lists the controllers Parent itself has (cgroup.controllers): those it could
	// delegate.
	Available []string
	// V1Pids says a cgroup v1 pids hierarchy is mounted. The provider does not use it.
	V1Pids bool
}

// ProbeCgroup inspects this process's cgroup v2 the way [New] does, without creating
// anything.
func ProbeCgroup() CgroupProbe {
	var p CgroupProbe
	if fi, err := os.Stat("/sys/fs/cgroup/pids/tasks"); err == nil && fi.Mode().IsRegular() {
		p.V1Pids = true
	}
	p.Parent = detectCgroupParent()
	if p.Parent == "" {
		return p
	}
	p.Writable = unix.Access(p.Parent, unix.W_OK) == nil
	if b, err := os.ReadFile(filepath.Join(p.Parent, "cgroup.subtree_control")); err == nil {
		p.Delegated = strings.Fields(string(b))
		slices.Sort(p.Delegated)
	}
	if b, err := os.ReadFile(filepath.Join(p.Parent, "cgroup.controllers")); err == nil {
		p.Available = strings.Fields(string(b))
		slices.Sort(p.Available)
	}
	return p
}

// probeTimeout bounds [Provider.Probe].
const probeTimeout = 30 * time.Second

// Probe starts `true` in a bwrap sandbox the way a dispatch's worker is started, as runAs
// when it is set, and reports why it could not. bwrap's own message is in the error.
func (p *Provider) Probe(ctx context.Context, runAs *compute.HostUser) (isolation string, err error) {
	var out syncWriter
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	h, err := p.Start(ctx, compute.Spec{
		ID: "doctor", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"},
		RunAs: runAs, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return "", err
	}
	exit, err := h.Wait()
	if err != nil {
		return "", err
	}
	if exit.Code != 0 {
		return "", fmt.Errorf("the sandbox exited %d (signal %q): %.300s", exit.Code, exit.Signal, strings.TrimSpace(out.String()))
	}
	return exit.Isolation, nil
}

// syncWriter keeps the first 4 KiB of the probe's output; stdout and stderr write to it
// concurrently.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder // guarded by mu
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 4096 {
		w.b.Write(p)
	}
	return len(p), nil
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
