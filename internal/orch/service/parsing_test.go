package service_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/store"
)

// TestServer_ParsingToldOfEachPlan: serve's memory limit makes room for a submitted plan
// while it is parsed (orch.Memory.Parsing): Server.Parsing hears of the plan before the
// parse and is done with it before the answer, for a plan refused as for one accepted.
func TestServer_ParsingToldOfEachPlan(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "orch.db"), orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eng, err := orch.Open(ctx, db, audit.New(nil), &recordingExec{subs: map[string]string{}}, orch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	engDone := make(chan struct{})
	go func() { eng.Run(ctx); close(engDone) }()
	sock := filepath.Join(dir, "orch.sock")
	ln, err := service.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []int
	open := 0
	srv := &service.Server{Engine: eng, Parsing: func(src []byte) func() {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, len(src))
		open++
		return func() { mu.Lock(); open--; mu.Unlock() }
	}}
	srvDone := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(srvDone) }()
	defer func() { cancel(); <-srvDone; <-engDone }()

	c := client.New(sock)
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
