package audit_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/store"
)

// rt28s3AckedChild appends from 32 writers through a Batcher, forever, and says on stdout,
// one write per line, what each Append answered: "ok SUBJECT" or "refused SUBJECT". Every
// fifth entry of every fourth writer has a detail with no canonical form (a float), so it
// must be refused to its writer alone while the batches it shares commit.
// rt28s3RoundEnv numbers the child, so each one's subjects are its own.
const rt28s3RoundEnv = "AGORA_AUDIT_RT28S3_ROUND"

func rt28s3AckedChild(ctx context.Context, db *store.DB, l *audit.Log, cp *audit.Checkpointer) {
	b := audit.NewBatcher(db, l)
	go b.Run(ctx)
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(line + "\n")
	}
	for w := range 32 {
		go func() {
			for i := 0; ; i++ {
				e := audit.Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("r%s.w%d.%d", os.Getenv(rt28s3RoundEnv), w, i)}
				if w%4 == 0 && i%5 == 4 {
					e.Subject = "bad-" + e.Subject
					e.Details = map[string]any{"ratio": 1.5}
				}
				if err := b.Append(ctx, e); err != nil {
					say("refused " + e.Subject)
				} else {
					say("ok " + e.Subject)
				}
			}
		}()
	}
	for {
		if _, err := cp.MaybeCheckpoint(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRedTeam28S3_BatcherAckedEntriesSurviveKill attacks the Batcher's merged transactions
// (1bd0e0a, 69df865: one answer per batch, a transaction taking the batches queued while
// it writes) with SIGKILL: 32 writers, some of whose entries must be refused, killed at
// different points, three times over one log. Afterwards every entry whose Append returned
// nil is in the log (nothing answered before it was durable), no refused entry is (neither
// acknowledged nor not), each writer's entries are in the order it wrote them, times
// strictly increase with the sequence, and the log's tree, checkpoint and export verify.
func TestRedTeam28S3_BatcherAckedEntriesSurviveKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agora.db")
	skey, vkey := audittest.NewKeyText(t)
	acked := map[string]bool{}
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashKeyEnv+"="+skey, crashPubEnv+"="+vkey, crashModeEnv+"=acked", fmt.Sprintf("%s=%d", rt28s3RoundEnv, round))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		oks, refusedBad := 0, 0
		deadline := time.After(60 * time.Second)
		for oks < 300*(round+1) || refusedBad == 0 {
			select {
			case line := <-lines:
				switch verdict, subj, _ := strings.Cut(line, " "); {
				case verdict == "ok" && strings.HasPrefix(subj, "bad-"):
					t.Fatalf("an entry with no canonical form was reported written: %s", subj)
				case verdict == "ok":
					acked[subj] = true
					oks++
				case verdict == "refused" && strings.HasPrefix(subj, "bad-"):
					refusedBad++
				default:
					t.Fatalf("child said %q", line)
				}
			case <-deadline:
				t.Fatalf("round %d: %d acknowledged entries in 60 s", round, oks)
			}
		}
		waitForEntries(t, path, int64(oks)) // and a checkpoint, which checkAfterCrash needs
		time.Sleep(time.Duration(round*3) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for line := range lines { // whole lines written before the kill
			if verdict, subj, _ := strings.Cut(line, " "); verdict == "ok" && !strings.HasPrefix(subj, "bad-") {
				acked[subj] = true
			}
		}
		cmd.Wait()
		checkAfterCrash(t, path, skey, vkey)
		checkAcked(t, path, acked, round)
	}
}

func checkAcked(t *testing.T, path string, acked map[string]bool, round int) {
	t.Helper()
	db, err := store.Open(t.Context(), path, audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs, err := audit.List(t.Context(), db.SQL(), audit.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	lastOf := map[string]int{} // writer "rN.wM" -> its last entry's index
	var prev time.Time
	for i, r := range recs {
		if r.Seq != uint64(i) {
			t.Fatalf("entry %d has seq %d", i, r.Seq)
		}
		if strings.HasPrefix(r.Subject, "bad-") {
			t.Fatalf("a refused entry was written: seq %d %s", r.Seq, r.Subject)
		}
		if i > 0 && !r.Time.After(prev) {
			t.Errorf("seq %d at %s, not after seq %d at %s", r.Seq, r.Time.Format(time.RFC3339Nano), i-1, prev.Format(time.RFC3339Nano))
		}
		prev = r.Time
		in[r.Subject] = true
		var c, w, n int
		if _, err := fmt.Sscanf(r.Subject, "r%d.w%d.%d", &c, &w, &n); err != nil {
			t.Fatalf("seq %d: subject %q", r.Seq, r.Subject)
		}
		key := fmt.Sprintf("r%d.w%d", c, w)
		if last, ok := lastOf[key]; ok && n <= last {
			t.Errorf("writer %s: entry %d written after its entry %d", key, n, last)
		}
		lastOf[key] = n
	}
	lost := 0
	for s := range acked {
		if !in[s] {
			lost++
			if lost <= 5 {
				t.Errorf("round %d: %s was acknowledged (Append returned nil) and is not in the log after the kill", round, s)
			}
		}
	}
	t.Logf("round %d: %d entries in the log, %d acknowledged", round, len(recs), len(acked))
	if lost > 0 {
		t.Fatalf("round %d: %d acknowledged entries lost of %d", round, lost, len(acked))
	}
}
