package provision_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/home"
)

// Environment switches that turn the test binary into one registering child process.
const (
	childHomeEnv  = "AGORA_PROVISION_TEST_CHILD_HOME"
	childIDEnv    = "AGORA_PROVISION_TEST_CHILD_ID"
	childStartEnv = "AGORA_PROVISION_TEST_CHILD_START"
)

const (
	children      = 4
	perChild      = 25
	childDeadline = 2 * time.Minute
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childHomeEnv); dir != "" {
		if err := runChild(dir, os.Getenv(childIDEnv), os.Getenv(childStartEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// runChild opens the shared AGORA_HOME as a separate process would, says it is ready (a file
// beside the start file), waits for the start file so every child writes at the same moment,
// then registers its 25 entries (alternately env bundles and capabilities) one by one.
func runChild(dir, id, startFile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), childDeadline)
	defer cancel()
	h, err := home.Open(ctx, dir, agoradb.Migrations())
	if err != nil {
		return err
	}
	defer h.Close()
	w, err := newWriter(h)
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "agora-child-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := os.WriteFile(startFile+".ready-"+id, nil, 0o644); err != nil {
		return err
	}
	for !fileExists(startFile) {
		if ctx.Err() != nil {
			return fmt.Errorf("child %s: start file never appeared", id)
		}
		time.Sleep(time.Millisecond)
	}
	for j := range perChild {
		name := fmt.Sprintf("c%s-%02d", id, j)
		var err error
		if j%2 == 0 {
			p, perr := w.PrepareEnv(name, map[string]string{"CHILD": id, "N": strconv.Itoa(j)},
				map[string][]byte{"TOKEN": fmt.Appendf(nil, "secret-%s-%d", id, j)}, nil)
			if perr != nil {
				return perr
			}
			_, _, err = w.Register(ctx, "child-"+id, "register", p)
		} else {
			d := filepath.Join(scratch, name)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, "id.txt"), []byte(name), 0o644); err != nil {
				return err
			}
			p, perr := w.PrepareCapability(name, d, nil)
			if perr != nil {
				return perr
			}
			_, _, err = w.Register(ctx, "child-"+id, "register", p)
		}
		if err != nil {
			return fmt.Errorf("register %s: %w", name, err)
		}
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestWriter_ConcurrentProcesses runs four copies of this test binary as separate processes,
// each registering 25 entries into the same AGORA_HOME at the same moment: nothing may be
// lost, and the audit log must stay one gap-free sequence.
func TestWriter_ConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: starts four processes; run without -short")
	}
	dir := filepath.Join(t.TempDir(), "home")
	if _, err := home.Init(t.Context(), dir, agoradb.Migrations()); err != nil {
		t.Fatal(err)
	}
	startFile := filepath.Join(t.TempDir(), "start")
	type child struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	var cs [children]*child
	for i := range children {
		c := &child{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")}
		c.cmd.Env = append(os.Environ(), childHomeEnv+"="+dir, childIDEnv+"="+strconv.Itoa(i), childStartEnv+"="+startFile)
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	// Every child has opened the home and reached the start line: release them.
	for i := range cs {
		agoratest.WaitFor(t, time.Minute, fmt.Sprintf("child %d at the start line", i), func() bool {
			return fileExists(startFile + ".ready-" + strconv.Itoa(i))
		})
	}
	if err := os.WriteFile(startFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, c.out.String())
		}
	}
	if t.Failed() {
		return
	}

	f := openFixture(t, dir)
	ctx := t.Context()
	envs, err := f.r.List(ctx, catalog.KindEnv)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := f.r.List(ctx, catalog.KindCapability)
	if err != nil {
		t.Fatal(err)
	}
	if total := len(envs) + len(caps); total != children*perChild {
		t.Errorf("catalog holds %d entries (%d envs, %d capabilities), want %d", total, len(envs), len(caps), children*perChild)
	}
	for i := range children {
		for j := range perChild {
			kind := catalog.KindCapability
			if j%2 == 0 {
				kind = catalog.KindEnv
			}
			name := fmt.Sprintf("c%d-%02d", i, j)
			if v, err := f.r.Resolve(ctx, kind, name); err != nil || v.RegisteredBy != "child-"+strconv.Itoa(i) {
				t.Errorf("Resolve %s %s = %+v, %v", kind, name, v, err)
			}
		}
	}
	if got := f.historyCount(t); got != children*perChild {
		t.Errorf("history rows = %d, want %d", got, children*perChild)
	}
	if got := f.count(t, `SELECT COUNT(*) FROM sealed_secrets`); got != children*((perChild+1)/2) {
		t.Errorf("sealed secrets = %d, want %d", got, children*((perChild+1)/2))
	}
	rows, err := f.h.DB.SQL().Query(`SELECT seq FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var want int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("audit seq %d where %d was expected: the log has a gap or a repeat", seq, want)
		}
		want++
	}
	if want != children*perChild {
		t.Errorf("audit entries = %d, want %d", want, children*perChild)
	}
}
