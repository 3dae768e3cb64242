package worker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/runtime/execrt"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// errNoClaim means a prestarted worker's slot was discarded (or its holder died) before any
// dispatch claimed it: the worker exits having read nothing.
var errNoClaim = errors.New("the warm slot was discarded before a dispatch claimed it")

// waitForClaim holds a worker started ahead in a warm slot (the host named
// its claim pipe in [wire.ClaimFDEnv]) until its dispatch's files are attached: one byte on
// the pipe. Until then the worker has touched nothing under its layout root and no process
// but it exists in the sandbox (the warm-up's pidfd probe exits at once). It then re-enters its working directory by path (the one it
// started in belongs to the tree the claim covered) and drops the variable, so nothing it
// starts inherits it. A worker started cold has no such variable and returns at once.
func waitForClaim() error {
	v, ok := os.LookupEnv(wire.ClaimFDEnv)
	if !ok {
		return nil
	}
	if err := os.Unsetenv(wire.ClaimFDEnv); err != nil {
		return err
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 || fd > 64 {
		return fmt.Errorf("%s=%q: want a descriptor from 3 to 64", wire.ClaimFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "claim")
	if f == nil {
		return fmt.Errorf("%s=%q: not a descriptor", wire.ClaimFDEnv, v)
	}
	defer f.Close()
	// bwrap sets PWD to the directory it entered (the host's spec.Dir); the kernel's name for
	// the working directory would do as well before the claim, but not after it.
	wd := os.Getenv("PWD")
	if !filepath.IsAbs(wd) {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	// What waits for no claim is done meanwhile.
	warmUp()
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return errNoClaim
		}
		return fmt.Errorf("wait for the claim: %w", err)
	}
	if err := os.Chdir(wd); err != nil {
		return fmt.Errorf("re-enter %s after the claim: %w", wd, err)
	}
	return nil
}

// warmUp does, while a worker started ahead waits for its claim, the first-use work that
// every run does and no claim shapes (0.9 of a warm claim's 2.6 ms in the worker): the
// manifest's strict decoder and checks (the reflection of its types, the patterns compiled on
// first use), the subagent document's and the result's codecs, and the pidfd probe os/exec
// makes before its first start (a child that exits at once; a cold worker's first start
// makes the same, so the agent's processes get the same pids either way). It reads no file,
// writes none, and keeps nothing but those caches: it parses constants of its own, and
// whatever it fails on the claim's run does again.
func warmUp() {
	if b, err := warmUpManifest().Marshal(); err == nil {
		_, _ = wire.ParseManifest(b)
	}
	_, _ = catalog.ParseSubagentDoc([]byte(warmUpDoc))
	_, _ = (&wire.Result{Version: wire.ResultVersion, Status: wire.StatusOK}).Marshal()
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Release()
	}
}

// warmUpDoc is a subagent document of the kind warmUpManifest names.
const warmUpDoc = `{"version":1,"runtime":"exec","command":["true"],"capabilities":[]}`

// warmUpManifest is a valid manifest with one of each part the checks visit.
func warmUpManifest() wire.Manifest {
	d := digest.Sum([]byte("warm"))
	return wire.Manifest{
		Version:             wire.ManifestVersion,
		DispatchID:          "warm",
		Subagent:            wire.Bundle{Name: "warm", Digest: d, Path: wire.SubagentFile},
		Capabilities:        []wire.Bundle{{Name: "warm", Digest: d, Path: wire.CapabilityPath(d)}},
		Runtime:             execrt.Name,
		Command:             []string{"true"},
		Grants:              wire.Grants{Commands: []string{"true"}},
		InputJSON:           "{}",
		Env:                 map[string]string{"WARM": "1"},
		SecretKeys:          []string{"WARM_KEY"},
		AgentTimeoutSeconds: 1,
		SetupTimeoutSeconds: 1,
		PIDNamespace:        true,
	}
}
