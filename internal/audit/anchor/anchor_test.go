package anchor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func record(cp string) string {
	b, _ := json.Marshal(map[string][]byte{"checkpoint": []byte(cp)})
	return string(b) + "\n"
}

func accept(context.Context, []byte) error { return nil }

func TestFile_HandsOverLastRecord(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		wantPrev string
		wantErr  string
		wantFile string
	}{
		{"missing file", "", "", "", record("new")},
		{"one record", record("a"), "a", "", record("a") + record("new")},
		{"two records", record("a") + record("b"), "b", "", record("a") + record("b") + record("new")},
		{"partial line after a crash", record("a") + `{"checkpo`, "a", "", record("a") + `{"checkpo` + "\n" + record("new")},
		{"garbage record", record("a") + "garbage\n", "", "not a checkpoint record", record("a") + "garbage\n"},
		{"unknown field", `{"checkpoint":"YQ==","x":1}` + "\n", "", "not a checkpoint record", `{"checkpoint":"YQ==","x":1}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "anchor.jsonl")
			if tt.content != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var prev []byte
			ev, err := anchor.NewFile(path, nil).Anchor(t.Context(), []byte("new"), func(_ context.Context, p []byte) error {
				prev = p
				return nil
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
				}
			} else if err != nil || string(prev) != tt.wantPrev || ev.Type != verify.AnchorFile {
				t.Errorf("got previous %q, evidence %+v, err %v; want previous %q", prev, ev, err, tt.wantPrev)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.wantFile {
				t.Errorf("file holds %q, want %q", got, tt.wantFile)
			}
		})
	}
}

func TestFile_RefusalLeavesFileAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "anchor.jsonl")
	os.WriteFile(path, []byte(record("a")), 0o644)
	refuse := errors.New("rolled back")
	_, err := anchor.NewFile(path, nil).Anchor(t.Context(), []byte("b"), func(context.Context, []byte) error { return refuse })
	if !errors.Is(err, refuse) {
		t.Errorf("got %v, want the refusal", err)
	}
	if got, _ := os.ReadFile(path); string(got) != record("a") {
		t.Errorf("file holds %q after a refusal", got)
	}
}

// TestFile_WritersAreOrdered: concurrent anchors (separate opens, as separate processes
// would) each see the record before theirs.
func TestFile_WritersAreOrdered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "anchor.jsonl")
	var mu sync.Mutex
	seen := map[string]bool{"": true}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				cp := fmt.Sprintf("w%d-%d", w, i)
				_, err := anchor.NewFile(path, nil).Anchor(context.Background(), []byte(cp), func(_ context.Context, prev []byte) error {
					mu.Lock()
					defer mu.Unlock()
					if !seen[string(prev)] {
						return fmt.Errorf("previous record %q was never written", prev)
					}
					seen[cp] = true
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(path)
	if n := bytes.Count(b, []byte("\n")); n != 80 {
		t.Errorf("file holds %d lines, want 80", n)
	}
}

func TestCommand(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		timeout time.Duration
		want    string // receipt, or error text when prefixed with "error: "
	}{
		{"receipt", []string{"/bin/sh", "-c", "cat >/dev/null; printf ' v1 \n'"}, 0, "v1"},
		{"reads the checkpoint", []string{"/bin/sh", "-c", `read line; test "$line" = checkpoint && echo ok`}, 0, "ok"},
		{"non-zero exit", []string{"/bin/sh", "-c", "echo no >&2; exit 4"}, 0, "error: exit status 4: no"},
		{"receipt too large", []string{"/bin/sh", "-c", "head -c 20000 /dev/zero"}, 0, "error: receipt larger than"},
		{"cancelled", []string{"/bin/sleep", "10"}, 100 * time.Millisecond, "error: context deadline exceeded"},
		{"missing program", []string{"/nonexistent/upload"}, 0, "error: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := anchor.NewCommand(tt.argv, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			ev, err := c.Anchor(ctx, []byte("checkpoint\n"), accept)
			if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %v, want an error containing %q", err, want)
				}
				return
			}
			if err != nil || string(ev.Receipt) != tt.want || ev.Name != "command:"+tt.argv[0] {
				t.Errorf("got receipt %q name %q err %v, want receipt %q", ev.Receipt, ev.Name, err, tt.want)
			}
		})
	}
	if _, err := anchor.NewCommand([]string{"upload"}, nil); err == nil {
		t.Error("a program on PATH was accepted")
	}
}

func TestNewRFC3161(t *testing.T) {
	tsa := audittest.NewTSA(t)
	a, err := anchor.NewRFC3161("https://tsa.example.com/tsr?token=secret", tsa.CAPEM, audittest.LoopbackPolicy)
	if err != nil || a.Name() != "rfc3161:https://tsa.example.com/tsr" {
		t.Errorf("got name %q (%v), want the URL without its query", a.Name(), err)
	}
	for _, tt := range []struct{ url, ca, want string }{
		{"ftp://tsa/x", "", "http or https"},
		{"https://user:pw@tsa/x", "", "without userinfo"},
		{"https://tsa/x", "not pem", "no PEM certificate"},
	} {
		if _, err := anchor.NewRFC3161(tt.url, []byte(tt.ca), audittest.LoopbackPolicy); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewRFC3161(%q): got %v, want an error containing %q", tt.url, err, tt.want)
		}
	}
}
