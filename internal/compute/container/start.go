package container

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/fdpass"
)

// Engine calls that end a container run even after the start context is cancelled, each
// bounded by this.
const cleanupTimeout = 30 * time.Second

// outputDrain bounds how long Wait waits, after the container ended, for the last of its
// output to arrive on the attach stream.
const outputDrain = 5 * time.Second

// Start creates, attaches to and starts a hardened container for s (see the package doc)
// and returns once it runs. Cancelling ctx kills it.
func (p *Provider) Start(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	opts, iso, err := p.createOptions(s)
	if err != nil {
		return nil, err
	}
	var secret []byte
	if len(s.Files) == 1 {
		// Read before anything is created: a secret over the limit fails here, not in the
		// container. The pipe's writer closes it once written.
		secret, err = io.ReadAll(io.LimitReader(s.Files[0], fdpass.MaxSize+1))
		if err != nil {
			return nil, fmt.Errorf("read the file for fd 3: %w", err)
		}
		if len(secret) > fdpass.MaxSize {
			clear(secret)
			return nil, fmt.Errorf("the file for fd 3 is over the %d byte limit", fdpass.MaxSize)
		}
	}
	h, err := p.startCreated(ctx, ctx, opts, iso, secret, s.Stdout, s.Stderr, s.Limits.Timeout)
	if err != nil {
		return nil, err // never a typed nil in the interface
	}
	return h, nil
}

// startCreated creates and starts the container of opts, sends secret (nil: none) to its
// stdin, and returns its handle; the secret is cleared. Cancelling runCtx kills the
// container; ctx bounds the engine calls of the start.
func (p *Provider) startCreated(ctx, runCtx context.Context, opts client.ContainerCreateOptions, iso string, secret []byte, stdout, stderr io.Writer, timeout time.Duration) (*handle, error) {
	created, err := p.cli.ContainerCreate(ctx, opts)
	if err != nil {
		clear(secret)
		return nil, fmt.Errorf("create container %q: %w", opts.Name, err)
	}
	id := created.ID
	fail := func(err error) (*handle, error) {
		clear(secret)
		p.remove(id)
		return nil, err
	}
	if p.runtime != "" {
		if err := p.checkRuntime(ctx, id); err != nil {
			return fail(err)
		}
	}
	// Attach before start, so no output is lost.
	att, err := p.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{
		Stream: true, Stdout: true, Stderr: true, Stdin: secret != nil,
	})
	if err != nil {
		return fail(fmt.Errorf("attach to container %q: %w", opts.Name, err))
	}
	h := &handle{p: p, id: id, iso: iso, done: make(chan struct{}), copied: make(chan struct{})}
	go h.copyOutput(att, stdout, stderr)
	began := time.Now()
	if _, err := p.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		att.Close()
		<-h.copied
		return fail(fmt.Errorf("start container %q: %w", opts.Name, err))
	}
	if secret != nil {
		_, werr := att.Conn.Write(secret)
		clear(secret)
		if werr == nil {
			werr = att.CloseWrite()
		}
		if werr != nil {
			p.kill(id)
			att.Close()
			<-h.copied
			return fail(fmt.Errorf("send the file for fd 3 to container %q: %w", opts.Name, werr))
		}
	}
	go h.run(runCtx, att, began, timeout)
	return h, nil
}

// handle is one started container.
type handle struct {
	p      *Provider
	id     string
	iso    string
	done   chan struct{} // closed when exit and err are set
	copied chan struct{} // closed when the attach stream has ended
	exit   compute.Exit
	err    error
}

func (h *handle) TaskID() string { return taskIDPrefix + h.id }

func (h *handle) Wait() (compute.Exit, error) {
	<-h.done
	return h.exit, h.err
}

// copyOutput demultiplexes the attach stream into the spec's writers until it ends.
func (h *handle) copyOutput(att client.ContainerAttachResult, stdout, stderr io.Writer) {
	defer close(h.copied)
	stdout = cmp.Or(stdout, io.Discard)
	stderr = cmp.Or(stderr, io.Discard)
	stdcopy.StdCopy(stdout, stderr, att.Reader)
}

// run waits for the container to end, killing it at the timeout or when ctx is cancelled,
// then records how it ended and removes it.
func (h *handle) run(ctx context.Context, att client.ContainerAttachResult, began time.Time, timeout time.Duration) {
	defer close(h.done)
	defer att.Close()
	// The wait outlives ctx: a cancelled start still has to see the container end.
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	wait := h.p.cli.ContainerWait(wctx, h.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout - time.Since(began))
		defer t.Stop()
		deadline = t.C
	}
	var (
		code    int64
		waitErr error
		gotCode bool
	)
	for !gotCode && waitErr == nil {
		select {
		case res := <-wait.Result:
			if res.Error != nil && res.Error.Message != "" {
				// No status came with it: podman answers a wait on a container removed
				// meanwhile with code 0 and "container has already been removed", which
				// must not read as a clean exit.
				waitErr = errors.New(res.Error.Message)
				break
			}
			code, gotCode = res.StatusCode, true
		case waitErr = <-wait.Error:
		case <-deadline:
			h.exit.TimedOut = true
			deadline = nil
			h.p.kill(h.id)
		case <-ctx.Done():
			if !h.exit.TimedOut {
				h.exit.Cancelled = true
			}
			ctx = context.Background() // fire once
			h.p.kill(h.id)
		}
	}
	h.exit.Duration = time.Since(began)
	h.exit.Isolation = h.iso
	select {
	case <-h.copied:
	case <-time.After(outputDrain):
		att.Close()
		<-h.copied
	}
	ictx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	ins, ierr := h.p.cli.ContainerInspect(ictx, h.id, client.ContainerInspectOptions{})
	switch {
	case ierr == nil && ins.Container.State != nil && !ins.Container.State.Running:
		h.setCode(int64(ins.Container.State.ExitCode))
	case isNotFound(ierr) || (!gotCode && isNotFound(waitErr)):
		// Removed behind this handle's back (by another process's Cancel, or anyone with
		// the engine's socket): the record must say the worker vanished. The wait's code,
		// when it came, still says how the process died.
		h.exit.Lost = true
		h.exit.Code = -1
		if gotCode {
			h.setCode(code)
		}
	case gotCode:
		// Inspect failed for another reason: the wait's code is all there is.
		h.setCode(code)
	default:
		h.exit.Code = -1
		h.err = fmt.Errorf("wait for container %q: %w", h.id, errors.Join(waitErr, ierr))
	}
	h.p.remove(h.id)
}

// setCode records an exit status; 128+n is how the engine reports a death by signal n.
func (h *handle) setCode(code int64) {
	if code > 128 && code < 128+65 {
		h.exit.Code = -1
		h.exit.Signal = syscall.Signal(code - 128).String()
		return
	}
	h.exit.Code = int(code)
}

// kill sends SIGKILL; a container already stopped or gone is fine.
func (p *Provider) kill(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_, err := p.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && !isNotFound(err) && !isConflict(err) {
		// podman refuses to kill a stopped container with an error it does not mark a
		// conflict ("container state improper"): what matters is that it no longer runs.
		ins, ierr := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if isNotFound(ierr) || ierr == nil && ins.Container.State != nil && !ins.Container.State.Running {
			return nil
		}
		return fmt.Errorf("kill container %q: %w", id, err)
	}
	return nil
}

// remove removes a container, killing it first if it still runs; one already gone is fine.
func (p *Provider) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_, err := p.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !isNotFound(err) && !isConflict(err) {
		return fmt.Errorf("remove container %q: %w", id, err)
	}
	return nil
}
