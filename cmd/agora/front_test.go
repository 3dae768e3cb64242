package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/orch/api"
)

// agoraBin is the front built with agora-full and agora-worker beside it (agoratest).
var agoraBin string

func TestMain(m *testing.M) {
	os.Exit(agoratest.RunWithBinary(m, &agoraBin))
}

// result is how a command ended: its exit code and streams.
type result struct {
	code     int
	out, err string
}

func run(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errOut.String()}
}

// fakeServe listens on home's orch.sock as serve would (a 0700 directory, a 0600 socket of
// this user) and answers every request with answer but the proof's, which it answers as
// serve does (a real challenge); it counts the requests answer saw and the proofs given.
type fakeServe struct {
	home   string
	count  atomic.Int64
	proofs atomic.Int64
	prover callerctx.Prover
}

func newFakeServe(t *testing.T, answer http.HandlerFunc) *fakeServe {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "orch")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "orch.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	fs := &fakeServe{home: home}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.HandoffProofPath {
			fs.proofs.Add(1)
			fd, err := fs.prover.Issue(0, time.Now())
			if err != nil {
				t.Error(err)
			}
			fmt.Fprintf(w, `{"fd":%d}`, fd)
			return
		}
		fs.count.Add(1)
		answer(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return fs
}

// env is the environment a command runs in: this home, no hand-off switches of the caller's.
func (fs *fakeServe) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "AGORA_HOME" && k != envNoHandoff && k != envHandoffLost && k != "TRACEPARENT" && !strings.HasPrefix(k, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "AGORA_HOME="+fs.home), extra...)
}

// full runs agora-full directly with args and no hand-off: what the front must equal when it
// does not hand the command off.
func full(t *testing.T, env []string, args ...string) result {
	t.Helper()
	c := exec.Command(filepath.Join(filepath.Dir(agoraBin), fullName), args...)
	c.Args[0] = "agora"
	c.Env = append(slices.Clone(env), envNoHandoff+"=1")
	return run(t, c)
}

func front(t *testing.T, env []string, args ...string) result {
	t.Helper()
	c := exec.Command(agoraBin, args...)
	c.Env = env
	return run(t, c)
}

// declinedNo is the line a command prints when serve declines with "no" (declines).
const declinedNo = "agora: the orchestrator (agora orch serve) declined this dispatch (no); it runs in this process\n"

func declines(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusConflict)
	fmt.Fprintln(w, `{"error":"no","code":"handoff_declined"}`) // serve's api.Error
}

// plantFull makes dir hold an agora-full that leaves a mark when it runs.
func plantFull(t *testing.T, dir string) (mark string) {
	t.Helper()
	mark = filepath.Join(dir, "planted-ran")
	script := "#!/bin/sh\ntouch " + mark + "\necho planted\n"
	if err := os.WriteFile(filepath.Join(dir, fullName), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return mark
}

// TestFront_RunsTheProgramBesideItsFile: the front runs agora-full beside the file it runs
// from (/proc/self/exe), never one on PATH, beside argv[0] or beside a symlink named agora:
// each of those places holds a planted agora-full that must not run.
func TestFront_RunsTheProgramBesideItsFile(t *testing.T) {
	// `help version`: agora-full's own words, which the front leaves to agora-full.
	want := full(t, os.Environ(), "help", "version")
	if want.code != 0 || !strings.Contains(want.out, "agora version") {
		t.Fatalf("agora-full help version: %+v", want)
	}
	evil := t.TempDir()
	mark := plantFull(t, evil)
	link := filepath.Join(evil, "agora")
	if err := os.Symlink(agoraBin, link); err != nil {
		t.Fatal(err)
	}
	for name, cmd := range map[string]func() *exec.Cmd{
		"PATH first": func() *exec.Cmd {
			c := exec.Command(agoraBin, "help", "version")
			c.Env = append(os.Environ(), "PATH="+evil+":"+os.Getenv("PATH"))
			return c
		},
		"argv[0] in the planted directory": func() *exec.Cmd {
			c := exec.Command(agoraBin, "help", "version")
			c.Args[0] = link
			return c
		},
		"a symlinked agora": func() *exec.Cmd { return exec.Command(link, "help", "version") },
		"a symlinked agora found on PATH": func() *exec.Cmd {
			c := exec.Command(link, "help", "version")
			c.Args[0] = "agora" // as a shell runs it
			c.Env = append(os.Environ(), "PATH="+evil)
			return c
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := run(t, cmd())
			if got.code != 0 || got.out != want.out {
				t.Errorf("got %+v, want agora-full's %q", got, want.out)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatalf("the planted %s ran", fullName)
			}
		})
	}
	t.Run("no agora-full beside it", func(t *testing.T) {
		alone := filepath.Join(t.TempDir(), "agora")
		b, err := os.ReadFile(agoraBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(alone, b, 0o755); err != nil {
			t.Fatal(err)
		}
		c := exec.Command(alone, "help", "version")
		c.Env = append(os.Environ(), "PATH="+evil)
		got := run(t, c)
		if got.code != 1 || !strings.Contains(got.err, fullName+" is missing beside") {
			t.Errorf("a front alone: %+v, want exit 1 naming the missing %s", got, fullName)
		}
		if _, err := os.Stat(mark); err == nil {
			t.Fatalf("the planted %s ran", fullName)
		}
	})
}

// TestFront_OddCommandLines: whatever the command line, the front ends exactly as agora-full
// does (here with a serve that declines everything): usage errors, help, forms of flags the
// front leaves to agora-full, an @FILE input, huge and odd arguments. The forms it must not
// forward never reach the socket.
func TestFront_OddCommandLines(t *testing.T) {
	fs := newFakeServe(t, declines)
	env := fs.env()
	long := strings.Repeat("x", 100<<10)
	many := []string{"dispatch", "run"}
	for range 5000 {
		many = append(many, "--env", "a")
	}
	for _, c := range []struct {
		name     string
		args     []string
		forwards bool // the front may ask serve (which declines)
	}{
		{"help", []string{"dispatch", "run", "--help"}, false},
		{"no subagent", []string{"dispatch", "run"}, false},
		{"empty subagent", []string{"dispatch", "run", "--subagent="}, false},
		{"a flag without its value", []string{"dispatch", "run", "--subagent"}, false},
		{"unknown flag", []string{"dispatch", "run", "--subagent", "x", "--bogus"}, false},
		{"an argument", []string{"dispatch", "run", "--subagent", "x", "extra"}, false},
		{"double dash", []string{"dispatch", "run", "--", "--subagent", "x"}, false},
		{"a switch given a value", []string{"dispatch", "run", "--subagent", "x", "--detach=false"}, false},
		{"bad output", []string{"dispatch", "run", "--subagent", "x", "-o", "yaml"}, false},
		{"joined shorthand", []string{"dispatch", "run", "--subagent", "x", "-ojson"}, false},
		{"repeated flag", []string{"dispatch", "run", "--subagent", "x", "--subagent", "y"}, false},
		{"input from a file", []string{"dispatch", "run", "--subagent", "x", "--input", "@/etc/passwd"}, false},
		{"malformed input", []string{"dispatch", "run", "--subagent", "x", "--input", "{"}, false},
		{"relative repo", []string{"dispatch", "run", "--subagent", "x", "--repo", "."}, false},
		{"repo and workspace", []string{"dispatch", "run", "--subagent", "x", "--repo", "/r", "--workspace", "w"}, false},
		{"negative timeout", []string{"dispatch", "run", "--subagent", "x", "--timeout", "-1s"}, false},
		{"quoted env", []string{"dispatch", "run", "--subagent", "x", "--env", `"a,b"`}, false},
		{"an actor", []string{"dispatch", "run", "--subagent", "x", "--actor", "root"}, false},
		{"a flag before the group", []string{"--actor", "root", "dispatch", "run", "--subagent", "x"}, false},
		{"many flags", many, false},
		{"a huge subagent name", []string{"dispatch", "run", "--subagent", long}, true},
		// Not UTF-8: JSON would carry it changed; agora-full runs it.
		{"invalid UTF-8", []string{"dispatch", "run", "--subagent", "\xff\xfe", "--target", "\x01"}, false},
		{"control characters", []string{"dispatch", "run", "--subagent", "a\x01", "--target", "\x01"}, true},
		{"every flag the front reads", []string{"dispatch", "run", "--subagent=x", "--env", "a, b,,c", "--target", "t",
			"--input", `{"a": [1, 2]}`, "--repo", "/nonexistent@v1", "--timeout", "1m", "--callback", "http://127.0.0.1:1/",
			"--detach", "--progress", "--learn", "-o", "json"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fs.count.Load()
			got := front(t, env, c.args...)
			asked := fs.count.Load() - before
			want := full(t, env, c.args...)
			// A command serve declined says so first, then ends as agora-full does.
			if asked == 1 {
				if !strings.HasPrefix(got.err, declinedNo) {
					t.Errorf("the front did not say serve declined: %q", got.err)
				}
				got.err = strings.TrimPrefix(got.err, declinedNo)
			}
			if got != want {
				t.Errorf("the front ended %+v\nagora-full ended %+v", got, want)
			}
			if asked > 1 || (!c.forwards && asked != 0) {
				t.Errorf("serve was asked %d times, want %d at most", asked, map[bool]int{true: 1}[c.forwards])
			}
			if c.forwards && asked != 1 {
				t.Errorf("the front did not hand off a command line it reads (asked %d)", asked)
			}
		})
	}
}

// TestFront_UntrustedSocket: a socket at orch.sock that is not this user's own, private one
// is never connected to: another user's (a directory and socket it owns), one others may
// use, or one reached through a symlink. The front leaves the command to agora-full, which
// refuses it as well.
func TestFront_UntrustedSocket(t *testing.T) {
	args := []string{"dispatch", "run", "--subagent", "x"}
	t.Run("open to others", func(t *testing.T) {
		fs := newFakeServe(t, declines)
		if err := os.Chmod(filepath.Join(fs.home, "orch", "orch.sock"), 0o666); err != nil {
			t.Fatal(err)
		}
		front(t, fs.env(), args...)
		if n := fs.count.Load(); n != 0 {
			t.Errorf("a socket others may use was asked %d times", n)
		}
	})
	t.Run("a symlinked directory", func(t *testing.T) {
		fs := newFakeServe(t, declines)
		home := t.TempDir()
		if err := os.Symlink(filepath.Join(fs.home, "orch"), filepath.Join(home, "orch")); err != nil {
			t.Fatal(err)
		}
		c := exec.Command(agoraBin, args...)
		c.Env = append(fs.env(), "AGORA_HOME="+home)
		run(t, c)
		if n := fs.count.Load(); n != 0 {
			t.Errorf("a symlinked orch directory was asked %d times", n)
		}
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("SKIP: needs root to give the socket to another user")
		}
		fs := newFakeServe(t, declines)
		for _, p := range []string{filepath.Join(fs.home, "orch"), filepath.Join(fs.home, "orch", "orch.sock")} {
			if err := os.Lchown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		got := front(t, fs.env(), args...)
		if n := fs.count.Load(); n != 0 {
			t.Errorf("another user's socket was asked %d times", n)
		}
		if want := full(t, fs.env(), args...); got != want {
			t.Errorf("the front ended %+v\nagora-full ended %+v", got, want)
		}
	})
}

// TestFront_FakeServe: what a process answering at a trusted orch.sock sends is read exactly:
// frames are written as they come, the end is rendered as agora-full renders it, and a
// malformed answer (a bad frame, an exit code out of range, an id that is not a dispatch's,
// a frame over the cap, a stream cut short) ends the command as a serve that stopped before
// accepting, never with an exec carrying what it sent.
func TestFront_FakeServe(t *testing.T) {
	args := []string{"dispatch", "run", "--subagent", "x"}
	stream := func(frames ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			for _, f := range frames {
				fmt.Fprintln(w, f)
			}
		}
	}
	stopped := "agora: error: the orchestrator (agora orch serve) stopped before it said it accepted the dispatch"
	for _, c := range []struct {
		name   string
		answer http.HandlerFunc
		want   result
		prefix bool // want.err is a prefix
	}{
		{"a whole stream", stream(`{"handle":"h"}`, `{"id":"01JAAAAAAAAAAAAAAAAAAAAAAA"}`, `{"out":"01JAAAAAAAAAAAAAAAAAAAAAAA\n"}`,
			`{"err":"agora: failed\n"}`, `{"end":{"exit":3}}`),
			result{3, "01JAAAAAAAAAAAAAAAAAAAAAAA\n", "agora: failed\n"}, false},
		{"an error with a hint", stream(`{"handle":"h"}`, `{"end":{"exit":2,"error":"bad\nworse","hint":"try","usage":true}}`),
			result{2, "", "agora: error: bad\nagora:   worse\nagora: hint: try\nagora: hint: run 'agora --help' for usage\n"}, false},
		{"an interrupt outside a Ctrl-C", stream(`{"end":{"exit":130,"error":"stopped","interrupted":true}}`),
			result{1, "", "agora: error: stopped\n"}, false},
		{"a malformed frame", stream(`{"out":"a"`), result{1, "", stopped}, true},
		{"two fields", stream(`{"out":"a","err":"b"}`), result{1, "", stopped}, true},
		{"a duplicated key", stream(`{"out":"a","out":"b"}`), result{1, "", stopped}, true},
		{"an exit code out of range", stream(`{"end":{"exit":300}}`), result{1, "", stopped}, true},
		{"an id with a line break", stream(`{"id":"01J\nAGORA_HOME=/"}`), result{1, "", stopped}, true},
		{"an id with an equals sign", stream(`{"id":"a=b"}`), result{1, "", stopped}, true},
		{"a frame over the cap", stream(`{"out":"` + strings.Repeat("a", 4<<20) + `"}`), result{1, "", stopped}, true},
		{"no end", stream(`{"handle":"h"}`, `{"out":"partial\n"}`), result{1, "partial\n", stopped}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := newFakeServe(t, c.answer)
			got := front(t, fs.env(), args...)
			ok := got.code == c.want.code && got.out == c.want.out
			if c.prefix {
				ok = ok && strings.HasPrefix(got.err, c.want.err)
			} else {
				ok = ok && got.err == c.want.err
			}
			if !ok {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
			if n := fs.count.Load(); n != 1 {
				t.Errorf("serve was asked %d times, want once", n)
			}
		})
	}
}

// TestFront_DeclinedAsksOnce: serve declining sends the command to agora-full told so
// (AGORA_NO_HANDOFF=1): serve is asked once, not again by agora-full, and a caller's own
// AGORA_HANDOFF_LOST never reaches serve (the front leaves such a command to agora-full).
func TestFront_DeclinedAsksOnce(t *testing.T) {
	fs := newFakeServe(t, declines)
	args := []string{"dispatch", "run", "--subagent", "x"}
	got := front(t, fs.env(), args...)
	if n := fs.count.Load(); n != 1 {
		t.Errorf("serve was asked %d times, want once", n)
	}
	// What agora-full prints, after the one line that says serve declined, and why.
	want := full(t, fs.env(), args...)
	want.err = declinedNo + want.err
	if got != want {
		t.Errorf("the front ended %+v\nwant %+v", got, want)
	}
	front(t, fs.env(envHandoffLost+"=01JAAAAAAAAAAAAAAAAAAAAAAA"), args...)
	if n := fs.count.Load(); n != 1 {
		t.Errorf("with %s set, serve was asked %d more times", envHandoffLost, n-1)
	}
}

// TestFront_SameRequestAsAgoraFull: for every command line the front hands off itself, the
// request serve receives is the one agora-full's own hand-off sends for it (but the time it
// stops waiting): the front reads those flags exactly as cobra does.
func TestFront_SameRequestAsAgoraFull(t *testing.T) {
	var bodies []map[string]any
	var mu sync.Mutex
	fs := newFakeServe(t, func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("decode the request: %v", err)
		}
		delete(m, "start_by")
		// Each answers its own challenge: a proof, never the same one.
		if m["proof"] == nil || len(m["proof"].(string)) != 64 {
			t.Errorf("a request without its proof: %v", m)
		}
		delete(m, "proof")
		delete(m, "proof_fd")
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
		declines(w, r)
	})
	// agora-full asks serve only in a home that exists.
	if err := os.Chmod(fs.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := full(t, fs.env(), "init"); got.code != 0 {
		t.Fatalf("agora init: %+v", got)
	}
	repoAt := t.TempDir() + "/a@b" // a directory whose name holds an '@' is taken whole
	if err := os.Mkdir(repoAt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--subagent", "x"},
		{"--subagent=x@sha256:ab", "-o", "json", "--detach", "--learn", "--progress"},
		{"--subagent", "x", "--env", " a, b,,c", "--target", "t", "--timeout", "90s", "--callback", "https://h/cb"},
		{"--subagent", "x", "--input", `{ "b": [1, 2.50, "\u00e9"], "a": {} }`, "--output=table"},
		{"--subagent", "x", "--repo", "/nonexistent/r@v1.2"},
		{"--subagent", "x", "--repo=" + repoAt},
		{"--subagent", "x", "--workspace", "app@release/1"},
		{"--subagent", "x", "--workspace", "app@sha256:ab"},
		{"--subagent", "-o", "--target", "--detach"},
		{"--env=", "--subagent", "x", "--timeout", "0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			mu.Lock()
			bodies = nil
			mu.Unlock()
			all := append([]string{"dispatch", "run"}, args...)
			front(t, fs.env(), all...)
			c := exec.Command(filepath.Join(filepath.Dir(agoraBin), fullName), all...)
			c.Env = fs.env()
			run(t, c)
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 2 {
				t.Fatalf("serve received %d requests, want one from each", len(bodies))
			}
			if !reflect.DeepEqual(bodies[0], bodies[1]) {
				t.Errorf("the front sent %v\nagora-full sent %v", bodies[0], bodies[1])
			}
		})
	}
}
