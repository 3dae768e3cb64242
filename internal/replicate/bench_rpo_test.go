package replicate_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
	"github.com/agora-dev/agora/internal/store"
)

// rpoChildEnv starts this test binary as BenchmarkRPOAtKill's writer (rpoChild) instead of
// its tests.
const rpoChildEnv = "AGORA_TEST_RPO_CHILD"

var rpoSchema = []store.Migration{{Name: "beats", SQL: "CREATE TABLE beats (n INTEGER PRIMARY KEY, at INTEGER NOT NULL)"}}

// rpoChild is the process killed: it replicates its database with the lag it is given and
// commits one row a millisecond, each holding its commit's wall time, until SIGKILL. The
// replicator dies with it, as serve's does.
func rpoChild() {
	ctx := context.Background()
	fail := func(err error) { fmt.Println("error:", err); os.Exit(1) }
	lag, err := time.ParseDuration(os.Getenv("RPO_LAG"))
	if err != nil {
		fail(err)
	}
	c, err := s3.New(s3.Config{Endpoint: os.Getenv("RPO_ENDPOINT"), Bucket: os.Getenv("RPO_BUCKET"), Prefix: "agora/"},
		s3.Credentials{AccessKeyID: os.Getenv("RPO_ACCESS_KEY"), SecretAccessKey: os.Getenv("RPO_SECRET_KEY")}, s3test.Policy())
	if err != nil {
		fail(err)
	}
	path := os.Getenv("RPO_DB")
	db, err := store.Open(ctx, path, rpoSchema)
	if err != nil {
		fail(err)
	}
	if _, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: lag}); err != nil {
		fail(err)
	}
	fmt.Println("ready")
	start := time.Now()
	for i := 0; ; i++ {
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec("INSERT INTO beats (n, at) VALUES (?, ?)", i, time.Now().UnixNano())
			return err
		})
		if err != nil {
			fail(err)
		}
		if d := time.Until(start.Add(time.Duration(i+1) * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
}

// BenchmarkRPOAtKill is the recovery point at a crash (RPO <= 1 s): a writer process
// commits a row a millisecond and replicates to the shared versitygw with replicate.lag; it is
// killed with SIGKILL at a random moment 2-5 s after its replicator started; its database is
// restored from the bucket. rpo is the time from the newest restored commit to the kill: the
// work lost. Each restore must hold every row up to its newest (no hole) or the run fails.
// lag=250ms beside lag=1s (the default) in the same run shows the bound follows the setting.
//
//	go test -run '^$' -bench RPOAtKill -benchtime 10x ./internal/replicate
func BenchmarkRPOAtKill(b *testing.B) {
	srv := s3test.Shared(b)
	for _, lag := range []time.Duration{250 * time.Millisecond, time.Second} {
		b.Run("lag="+lag.String(), func(b *testing.B) {
			var rpos []time.Duration
			var kept []int
			for b.Loop() {
				cfg := srv.Bucket(b, false)
				dir := b.TempDir()
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), rpoChildEnv+"=1", "RPO_LAG="+lag.String(), "RPO_DB="+filepath.Join(dir, "agora.db"),
					"RPO_ENDPOINT="+cfg.Endpoint, "RPO_BUCKET="+cfg.Bucket,
					"RPO_ACCESS_KEY="+srv.Creds.AccessKeyID, "RPO_SECRET_KEY="+srv.Creds.SecretAccessKey)
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				line, _ := bufio.NewReader(out).ReadString('\n')
				if line != "ready\n" {
					cmd.Process.Kill()
					cmd.Wait()
					b.Fatalf("the writer said %q", line)
				}
				time.Sleep(2*time.Second + rand.N(3*time.Second))
				killAt := time.Now()
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()

				restored := filepath.Join(b.TempDir(), "agora.db")
				c := srv.Client(b, cfg)
				if _, err := replicate.Restore(b.Context(), replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: restored}); err != nil {
					b.Fatalf("restore: %v", err)
				}
				db, err := store.OpenReadOnly(b.Context(), restored)
				if err != nil {
					b.Fatal(err)
				}
				var n, last int64
				var newest int64
				err = db.SQL().QueryRowContext(b.Context(), "SELECT count(*), coalesce(max(n), -1), coalesce(max(at), 0) FROM beats").Scan(&n, &last, &newest)
				db.Close()
				if err != nil {
					b.Fatal(err)
				}
				if n != last+1 {
					b.Fatalf("the restore holds %d rows up to row %d: a hole", n, last)
				}
				if n == 0 {
					b.Fatalf("the restore holds no row after %s of writing", lag)
				}
				rpos = append(rpos, killAt.Sub(time.Unix(0, newest)))
				kept = append(kept, int(n))
			}
			slices.Sort(rpos)
			b.ReportMetric(ms(rpos[len(rpos)/2]), "rpo-p50-ms")
			b.ReportMetric(ms(rpos[len(rpos)-1]), "rpo-max-ms")
			b.ReportMetric(float64(slices.Min(kept)), "rows-kept-min")
		})
	}
}
