package netgw

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Attacks on the HA gateway (stored sessions, the fence, /readyz, Reattach), attacked by a
// dispatch's pod, another dispatch's pod, and the supervisor that dies between two steps.

// TestRedHA_AnotherDispatchsTokenDuringTakeover (attack: another dispatch's pod, during the
// takeover window): while the new leader holds two dispatches' rows and neither or only one is
// taken back, one dispatch's token reaches nothing of the other's, on any route, and is told
// 403 (never 503, which would keep it retrying as if it were the other's worker). Route ids
// that differ from a stored one by case, a character more or less, never reach its row.
func TestRedHA_AnotherDispatchsTokenDuringTakeover(t *testing.T) {
	old := startReplica(t, nil, nil)
	la, lb := stageLayout(t, "01REDHAAAAAA"), stageLayout(t, "01REDHABBBBB")
	specA, specB := la.podSpec(t), lb.podSpec(t)
	sa, err := old.reg.Export(t.Context(), specA)
	must(t, err)
	defer sa.Close()
	sb, err := old.reg.Export(t.Context(), specB)
	must(t, err)
	defer sb.Close()
	old.gw.close()
	next := startReplica(t, restoreDB(t, old.db), old.gw)
	for _, d := range []string{la.out, lb.out} { // the new leader's out directories: made again, empty
		must(t, os.RemoveAll(d))
		must(t, os.Mkdir(d, 0o700))
	}
	upload := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok","forged":"by A"}`})
	attackB := func(when string) {
		t.Helper()
		pb := remote.RoutePrefix + lb.id
		for _, c := range []struct {
			method, path string
			body         io.Reader
		}{
			{"GET", pb + "/session", nil},
			{"GET", pb + "/files/0", nil},
			{"GET", pb + "/mounts/bundle", nil},
			{"PUT", pb + "/mounts/out", bytes.NewReader(upload)},
			{"POST", pb + "/streams/stdout", strings.NewReader("A writes B's log\n")},
		} {
			if code, msg := next.do(t, c.method, c.path, sa.Token, c.body); code != 403 {
				t.Errorf("%s: A's token on %s %s: %d %q, want 403", when, c.method, c.path, code, msg)
			}
		}
		if ents, _ := os.ReadDir(lb.out); len(ents) != 0 {
			t.Errorf("%s: A's token put %v in B's out directory", when, ents)
		}
	}
	attackB("neither taken back")

	// Ids near B's, with B's own token: none reaches B's row (and so none is told 503).
	for _, id := range []string{strings.ToLower(lb.id), lb.id[:len(lb.id)-1], lb.id + "B", lb.id + "%00", " " + lb.id} {
		code, msg := next.do(t, "GET", remote.RoutePrefix+id+"/session", sb.Token, nil)
		if code == 200 || code == 503 {
			t.Errorf("B's token at dispatch %q: %d %q, want refused (no such session)", id, code, msg)
		}
	}

	// A is taken back; B is not yet.
	ta, err := next.reg.Reattach(t.Context(), specA)
	must(t, err)
	defer ta.Close()
	if code, msg := next.do(t, "GET", remote.RoutePrefix+la.id+"/session", sa.Token, nil); code != 200 {
		t.Fatalf("A's own session after its take-back: %d %q", code, msg)
	}
	attackB("A taken back")
	if code, msg := next.do(t, "GET", remote.RoutePrefix+la.id+"/session", sb.Token, nil); code != 403 {
		t.Errorf("B's token on A's taken-back session: %d %q, want 403", code, msg)
	}
	// And B, taken back, is B's alone.
	tb, err := next.reg.Reattach(t.Context(), specB)
	must(t, err)
	defer tb.Close()
	attackB("both taken back")
	if code, msg := next.do(t, "PUT", remote.RoutePrefix+lb.id+"/mounts/out", sb.Token, bytes.NewReader(upload)); code != 204 {
		t.Errorf("B's own upload: %d %q", code, msg)
	}
}

// TestRedHA_ReadyzSaysOnlyThat (attack: an unauthenticated client of the gateway's address):
// /readyz answers the same to any caller, token or none, and says no more than leader or
// not: no fence error (the Lease's name, the reason), no session, nothing else on its path.
func TestRedHA_ReadyzSaysOnlyThat(t *testing.T) {
	r := startReplica(t, nil, nil)
	l := stageLayout(t, "01REDHAREADY")
	s, err := r.reg.Export(t.Context(), l.podSpec(t))
	must(t, err)
	defer s.Close()
	for _, fence := range []error{nil, errors.New("lease agora/agora-leader: not renewed in time by agora-0")} {
		r.fence = fence
		want, body := 200, "leader\n"
		if fence != nil {
			want, body = 503, "not the leader\n"
		}
		for _, token := range []string{"", s.Token, TokenPrefix + "AAAA"} {
			code, msg := r.do(t, "GET", ReadyPath, token, nil)
			if code != want || msg != body {
				t.Errorf("fence %v, token %.8q: GET %s: %d %q, want %d %q", fence, token, ReadyPath, code, msg, want, body)
			}
		}
		for _, m := range []string{"POST", "PUT", "DELETE"} {
			if code, _ := r.do(t, m, ReadyPath, "", nil); code != 405 {
				t.Errorf("%s %s: %d, want 405", m, ReadyPath, code)
			}
		}
		// Only the exact path is the probe: anything else is a gateway route, fenced like all.
		for _, p := range []string{ReadyPath + "/", "/READYZ", "/readyz/../" + strings.TrimPrefix(remote.RoutePrefix, "/") + l.id + "/session"} {
			code, msg := r.do(t, "GET", p, s.Token, nil)
			if code == 200 && fence != nil || strings.Contains(msg, "leader\n") && !strings.Contains(msg, "not") && fence != nil {
				t.Errorf("fenced: GET %s: %d %q", p, code, msg)
			}
		}
	}
}

// haSupervisorEnv names, in a child of this test binary, what an `agora dispatch supervise`
// does with the gateway (it exports its dispatch's session into the registry serve's gateway
// reads, agora.db shared): see haSupervisorMain.
const haSupervisorEnv = "AGORA_NETGW_TEST_HA_SUPERVISOR"

type haSupervisorArgs struct {
	Dir, DB, ID, Out string
	// End: the dispatch's end is committed (the end's trigger deletes the row in that
	// transaction; the child deletes it as the trigger does) before the child is killed, so
	// the kill falls between the end's commit and the session's close.
	End bool
}

// haSupervisorMain exports the session of the dispatch the environment names, says its token
// on stdout, commits its end when asked (says "ended"), and waits to be killed (-9).
func haSupervisorMain() int {
	var a haSupervisorArgs
	if err := json.Unmarshal([]byte(os.Getenv(haSupervisorEnv)), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	db, err := store.Open(ctx, a.DB, SessionMigrations)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	reg := &Registry{Dir: a.Dir, Sessions: &DBSessions{DB: db}}
	spec := compute.Spec{ID: a.ID, Binds: []compute.Bind{{Src: a.Out, Dst: wire.OutPath, Writable: true, Result: true}},
		Stdout: io.Discard, Stderr: io.Discard}
	s, err := reg.Export(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(s.Token)
	if a.End {
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM gateway_sessions WHERE dispatch_id = ?`, a.ID)
			return err
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("ended")
	}
	select {}
}

// TestRedHA_SupervisorKilled (kill -9): the process that exported a session dies by SIGKILL,
// leaving its session.json, its lock file and its dead sockets on the disk serve's gateway
// reads. Killed after its dispatch's end was committed (the row deleted with it) and before
// the session's close removed the file: the token is refused 401 there and by a replica
// restored from that agora.db, and nothing takes the session back. Killed with the dispatch
// live: its adopter takes the session back on the same disk (no lock of the dead process in
// the way), the worker uploads, and the close ends the token.
func TestRedHA_SupervisorKilled(t *testing.T) {
	for _, end := range []bool{true, false} {
		t.Run(map[bool]string{true: "after the end", false: "live"}[end], func(t *testing.T) {
			r := startReplica(t, nil, nil)
			id := "01REDHAKILL" + map[bool]string{true: "E", false: "L"}[end]
			out := filepath.Join(t.TempDir(), "out")
			must(t, os.Mkdir(out, 0o700))
			args, _ := json.Marshal(haSupervisorArgs{Dir: r.reg.Dir, DB: r.db.Path(), ID: id, Out: out, End: end})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), haSupervisorEnv+"="+string(args))
			cmd.Stderr = os.Stderr
			stdout, err := cmd.StdoutPipe()
			must(t, err)
			must(t, cmd.Start())
			lines := bufio.NewScanner(stdout)
			var got []string
			for len(got) < map[bool]int{true: 2, false: 1}[end] && lines.Scan() {
				got = append(got, lines.Text())
			}
			must(t, cmd.Process.Kill())
			cmd.Wait()
			if len(got) == 0 || !strings.HasPrefix(got[0], TokenPrefix) || end && (len(got) < 2 || got[1] != "ended") {
				t.Fatalf("the supervisor said %q", got)
			}
			token := got[0]
			if _, err := os.Stat(filepath.Join(r.reg.Dir, id, sessionFile)); err != nil {
				t.Fatalf("the kill did not fall before the close: %v", err)
			}
			path := remote.RoutePrefix + id + "/session"
			spec := compute.Spec{ID: id, Binds: []compute.Bind{{Src: out, Dst: wire.OutPath, Writable: true, Result: true}}}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if end {
				if code, msg := r.do(t, "GET", path, token, nil); code != 401 {
					t.Errorf("the token of a dispatch whose end committed, its supervisor killed before the close: %d %q, want 401", code, msg)
				}
				if _, err := r.reg.Reattach(ctx, spec); !errors.Is(err, ErrNoSession) {
					t.Errorf("the session of an ended dispatch was taken back: %v", err)
				}
				next := startReplica(t, restoreDB(t, r.db), r.gw)
				if code, _ := next.do(t, "GET", path, token, nil); code != 401 {
					t.Errorf("the token at a replica restored after the end: %d, want 401", code)
				}
				if _, err := next.reg.Reattach(ctx, spec); !errors.Is(err, ErrNoSession) {
					t.Errorf("the new leader took back an ended dispatch's session: %v", err)
				}
				return
			}
			taken, err := r.reg.Reattach(ctx, spec)
			if err != nil {
				t.Fatalf("take back the live session of a killed supervisor: %v", err)
			}
			upload := tarOf(t, tarEntry{name: "result.json", body: `{"status":"ok"}`})
			if code, msg := r.do(t, "PUT", remote.RoutePrefix+id+"/mounts/out", token, bytes.NewReader(upload)); code != 204 {
				t.Errorf("the upload after the take-back: %d %q", code, msg)
			}
			must(t, taken.Close())
			if code, _ := r.do(t, "GET", path, token, nil); code != 401 {
				t.Errorf("the token after the adopter's close: %d, want 401", code)
			}
		})
	}
}
