package service_test

import (
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/service"
)

// TestServer_ParsingToldOfEachPlan: serve's memory limit makes room for a submitted plan
// while it is parsed (orch.Memory.Parsing): Server.Parsing hears of the plan before the
// parse and is done with it before the answer, for a plan refused as for one accepted.
func TestServer_ParsingToldOfEachPlan(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	var told []int
	open := 0
	srv := &service.Server{Parsing: func(src []byte) func() {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, len(src))
		open++
		return func() { mu.Lock(); open--; mu.Unlock() }
	}}
	c := startService(t, &recordingExec{subs: map[string]string{}}, orch.Options{}, srv)
	good := "version: 1\nname: parsed\ntasks:\n  - {id: a, subagent: worker}\n"
	bad := "version: 1\nname: refused\ntasks:\n  - {id: a, subagent: worker, depends_on: [nobody]}\n"
	if _, err := c.Submit(ctx, api.SubmitRequest{File: "p.yaml", Source: []byte(good), Actor: "tester"}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if _, err := c.Submit(ctx, api.SubmitRequest{File: "q.yaml", Source: []byte(bad), Actor: "tester"}); err == nil {
		t.Fatal("a plan depending on a task it does not have was accepted")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 || told[0] != len(good) || told[1] != len(bad) || open != 0 {
		t.Errorf("Parsing was told %v with %d still open, want [%d %d] and none open", told, open, len(good), len(bad))
	}
}
