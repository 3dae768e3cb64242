package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/service"
)

// racingCatalog is a catalog in which a new version of the reviewer "judge" is registered
// while a plan is being submitted: the first time a version of it is pinned, the
// registration lands, and the latest version is then one that may not review (an exec
// command). It records every version its reviewer check approved.
type racingCatalog struct {
	mu       sync.Mutex
	landed   bool
	approved map[string]bool
}

const (
	judgeV1 = "judge@sha256:" + "1111111111111111111111111111111111111111111111111111111111111111"
	judgeV2 = "judge@sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
	workerV = "worker@sha256:" + "3333333333333333333333333333333333333333333333333333333333333333"
)

func (c *racingCatalog) resolve(ref string) (string, error) {
	switch {
	case ref == "judge" && c.landed, ref == judgeV2:
		return judgeV2, nil
	case ref == "judge", ref == judgeV1:
		return judgeV1, nil
	case ref == "worker", ref == workerV:
		return workerV, nil
	}
	return "", fmt.Errorf("subagent %q not found", ref)
}

func (c *racingCatalog) Subagent(_ context.Context, ref string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.resolve(ref)
	return err
}

func (c *racingCatalog) Reviewer(_ context.Context, ref, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := c.resolve(ref)
	if err != nil {
		return err
	}
	if v == judgeV2 {
		return fmt.Errorf("subagent %q runs the exec runtime and cannot review", ref)
	}
	c.approved[v] = true
	return nil
}

func (c *racingCatalog) PinSubagent(_ context.Context, ref string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref == "judge" {
		c.landed = true // the registration lands now, between two lookups of one submission
	}
	return c.resolve(ref)
}

func (c *racingCatalog) Env(context.Context, string) error               { return nil }
func (c *racingCatalog) Target(context.Context, string) error            { return nil }
func (c *racingCatalog) Workspace(context.Context, string, string) error { return nil }
func (c *racingCatalog) Queue(context.Context, string) error             { return nil }

// recordingExec ends every attempt succeeded and records the subagent version each ran.
type recordingExec struct {
	mu   sync.Mutex
	subs map[string]string // task -> subagent
}

func (x *recordingExec) Start(_ context.Context, a orch.Attempt, done func(orch.Outcome)) {
	x.mu.Lock()
	x.subs[a.TaskID] = a.Subagent
	x.mu.Unlock()
	o := orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded}
	if strings.Contains(a.TaskID, ".review-") {
		o.Review = &orch.Review{Approve: true, Reasons: []string{}}
	}
	go done(o)
}
func (x *recordingExec) Cancel(context.Context, string) {}

// A subagent registered while a plan is submitted: the version the run pins for a bare name
// is the version the plan was checked with. Checked with one version (a reviewer that may
// review) and pinned to the next (an exec command, which may not), the run would dispatch a
// reviewer no check ever passed.
func TestRedTeam44S_PinnedIsWhatWasChecked(t *testing.T) {
	ctx := t.Context()
	cat := &racingCatalog{approved: map[string]bool{}}
	x := &recordingExec{subs: map[string]string{}}
	c := startService(t, x, orch.Options{Refs: cat, Queues: map[string]int{"default": 4}}, &service.Server{})
	src := "version: 1\nname: racing\ntasks:\n  - {id: t, subagent: worker, review: {subagents: [judge], approve: 1}}\n"
	sub, err := c.Submit(ctx, api.SubmitRequest{File: "p.yaml", Source: []byte(src), Actor: "tester"})
	if err != nil {
		// Refused: the version it would pin is the one checked, and it may not review.
		if !strings.Contains(err.Error(), "cannot review") {
			t.Fatalf("submit: %v", err)
		}
		return
	}
	agoratest.Eventually(t, 30*time.Second, "the run's end", func() error {
		r, err := c.Status(ctx, sub.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !lifecycle.RunEnded(r.State) {
			return fmt.Errorf("run %s", r.State)
		}
		return nil
	})
	x.mu.Lock()
	defer x.mu.Unlock()
	cat.mu.Lock()
	defer cat.mu.Unlock()
	got := x.subs["t.review-judge"]
	if !cat.approved[got] {
		t.Errorf("the reviewer dispatched %q; the reviewer check approved only %v", got, cat.approved)
	}
}
