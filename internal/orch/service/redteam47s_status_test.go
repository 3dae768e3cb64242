package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/orch/service"
)

// rawHTTP is an HTTP client of the service's socket that hands back the bytes as sent.
func rawHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}

// rawDo sends method path (body: JSON of in, when not nil) and returns the status code and
// the body's bytes.
func rawDo(t *testing.T, hc *http.Client, method, path string, in any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://orch"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// hostileText is what a task's detail or question may hold: quotes, backslashes, newlines,
// U+2028 and U+2029 (which end a line in JavaScript), a closing script tag, a NUL, and
// length.
var hostileText = "a \"quoted\" \\back\\slash\nnew line\r\n\t tab \u2028 \u2029 </script><!-- \x00 nul \U0001F600 " +
	strings.Repeat("long ", 3000)

// hostileExec ends each task by its name: ask asks hostileText until it is answered, then
// succeeds; bad fails with hostileText as its detail; hold runs until the test ends; every
// other task succeeds.
type hostileExec struct{ end chan struct{} }

func (x hostileExec) Start(_ context.Context, a orch.Attempt, done func(orch.Outcome)) {
	o := orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded}
	switch a.TaskID {
	case "ask":
		if a.Answer == "" {
			o.State, o.Question = lifecycle.TaskNeedsInput, hostileText
		}
	case "bad":
		o.State, o.Reason, o.Detail = lifecycle.TaskFailed, "exit", hostileText
	case "hold":
		go func() {
			<-x.end
			done(o)
		}()
		return
	}
	go done(o)
}
func (hostileExec) Cancel(context.Context, string) {}

// checkRunBytes checks one encoded run: a single line (one newline, at its end) of valid
// JSON with no raw U+2028, U+2029 or '<', whose tasks come first, and whose run decodes to
// want (the service's queue state left out). line is the run inside a watch line when true.
func checkRunBytes(t *testing.T, what string, b []byte, line bool, want api.Run) {
	t.Helper()
	if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("%s: %d newlines in %d bytes, want one at the end", what, bytes.Count(b, []byte("\n")), len(b))
	}
	if bytes.ContainsAny(b, "\u2028\u2029<\r\x00") {
		t.Errorf("%s: raw U+2028, U+2029, '<', CR or NUL in the bytes", what)
	}
	if !json.Valid(b) {
		t.Fatalf("%s: not valid JSON: %.300q", what, b)
	}
	runBytes := b
	if line {
		var l struct {
			Run json.RawMessage `json:"run"`
		}
		if err := json.Unmarshal(b, &l); err != nil || l.Run == nil {
			t.Fatalf("%s: a watch line without a run: %v", what, err)
		}
		runBytes = l.Run
	}
	if len(want.Tasks) > 0 && !bytes.HasPrefix(runBytes, []byte(`{"tasks":[`)) {
		t.Errorf("%s: the run begins %.40q, not with its tasks", what, runBytes)
	}
	var got api.Run
	dec := json.NewDecoder(bytes.NewReader(runBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got.QueueState = nil
	if a, w := agoratest.PlainJSON(t, got), agoratest.PlainJSON(t, want); !reflect.DeepEqual(a, w) {
		t.Errorf("%s: the run differs from the engine's:\n%.600v\nengine's:\n%.600v", what, a, w)
	}
}

// TestRedteam47s_HostileTextEncodesExactly attacks the status's encoding, a task at a time:
// a question and a detail of hostile text, and a run of one task. The status, an action's
// answer and every watch line must be one line of valid JSON with U+2028, U+2029 and '<'
// escaped, its tasks first, that decodes to exactly the engine's Status.
func TestRedteam47s_HostileTextEncodesExactly(t *testing.T) {
	x := hostileExec{end: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(x.end) }) }
	t.Cleanup(release)
	srv := &service.Server{Spool: t.TempDir()}
	c, sock := startServiceOn(t, x, orch.Options{}, srv)
	hc := rawHTTP(sock)
	ctx := t.Context()
	sub, err := c.Submit(ctx, api.SubmitRequest{File: "hostile.json", Actor: "test", Source: []byte(`{"version": 1, "name": "hostile",
		"concurrency": 4, "tasks": [{"id": "hold", "subagent": "worker"}, {"id": "ask", "subagent": "worker"},
		{"id": "bad", "subagent": "worker"}, {"id": "after-bad", "subagent": "worker", "depends_on": ["bad"]},
		{"id": "last", "subagent": "worker", "depends_on": ["ask", "hold"]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.Run.ID
	agoratest.WaitFor(t, 30*time.Second, "ask to ask and bad to fail", func() bool {
		r, err := srv.Engine.Status(ctx, id)
		return err == nil && r.Counts[lifecycle.TaskNeedsInput] == 1 && r.Counts[lifecycle.TaskSkipped] == 1 &&
			r.Counts[lifecycle.TaskRunning] == 1
	})
	want, err := srv.Engine.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	code, b := rawDo(t, hc, http.MethodGet, "/v1/runs/"+id, nil)
	if code != http.StatusOK {
		t.Fatalf("status: %d %s", code, b)
	}
	checkRunBytes(t, "status", b, false, want)
	code, b = rawDo(t, hc, http.MethodGet, "/v1/runs/hostile", nil)
	if code != http.StatusOK {
		t.Fatalf("status by name: %d %s", code, b)
	}
	checkRunBytes(t, "status by name", b, false, want)

	// A watch: its first line, then the lines after the question is answered, to the run's
	// next run line.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://orch/v1/runs/"+id+"/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	first, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	checkRunBytes(t, "first watch line", first, true, want)

	code, b = rawDo(t, hc, http.MethodPost, "/v1/runs/"+id+"/answer", api.ActionRequest{Task: "ask", Answer: hostileText, Actor: "test"})
	if code != http.StatusOK {
		t.Fatalf("answer: %d %s", code, b)
	}
	if !json.Valid(b) || bytes.Count(b, []byte("\n")) != 1 || !bytes.HasPrefix(b, []byte(`{"tasks":[`)) {
		t.Errorf("the answer's answer is not one line of JSON with its tasks first: %.300q", b)
	}
	var answered api.Run
	if err := json.Unmarshal(b, &answered); err != nil || answered.ID != id || len(answered.Tasks) != 5 {
		t.Errorf("the answer's answer: run %s of %d tasks (%v)", answered.ID, len(answered.Tasks), err)
	}
	// hold ends, and so does the run: every line to the stream's end, the last the ended run.
	release()
	runLines := 0
	for lines := 2; ; lines++ {
		l, err := br.ReadBytes('\n')
		if err == io.EOF && len(l) == 0 {
			break
		}
		if err != nil {
			t.Fatalf("watch line %d: %v", lines, err)
		}
		if !json.Valid(l) || bytes.Count(l, []byte("\n")) != 1 {
			t.Fatalf("watch line %d is not one line of JSON: %.300q", lines, l)
		}
		if bytes.HasPrefix(l, []byte(`{"run":`)) {
			runLines++
			var w struct{ Run api.Run }
			if err := json.Unmarshal(l, &w); err != nil || w.Run.ID != id || len(w.Run.Tasks) != 5 {
				t.Errorf("watch run line: run %s of %d tasks (%v)", w.Run.ID, len(w.Run.Tasks), err)
			}
		}
	}
	ended, err := srv.Engine.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if runLines == 0 || ended.State != lifecycle.RunFailed {
		t.Errorf("the watch ended after %d run lines, the run %s", runLines, ended.State)
	}

	// A run of one task.
	one, err := c.Submit(ctx, api.SubmitRequest{File: "one.json", Actor: "test",
		Source: []byte(`{"version": 1, "name": "one", "tasks": [{"id": "only", "subagent": "worker"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	agoratest.WaitFor(t, 30*time.Second, "the one-task run to end", func() bool {
		r, err := srv.Engine.Status(ctx, one.Run.ID)
		return err == nil && r.State == lifecycle.RunSucceeded
	})
	want, err = srv.Engine.Status(ctx, one.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	code, b = rawDo(t, hc, http.MethodGet, "/v1/runs/"+one.Run.ID, nil)
	if code != http.StatusOK {
		t.Fatalf("one: %d %s", code, b)
	}
	checkRunBytes(t, "one task", b, false, want)
	code, b = rawDo(t, hc, http.MethodGet, "/v1/runs/"+one.Run.ID+"/watch", nil) // an ended run: one line
	if code != http.StatusOK {
		t.Fatalf("one's watch: %d %s", code, b)
	}
	checkRunBytes(t, "one task's watch", b, true, want)
}

// paddedPlan is a plan of n tasks waiting for hold, named so that their ids add pad
// characters to those of n tasks named t-00000...
func paddedPlan(name string, n, pad int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"version": 1, "name": %q, "concurrency": 1, "tasks": [{"id": "hold", "subagent": "worker"}`, name)
	for i := range n {
		extra := min(pad, 50)
		pad -= extra
		fmt.Fprintf(&b, `, {"id": "t-%05d%s", "subagent": "worker", "depends_on": ["hold"]}`, i, strings.Repeat("x", extra))
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestRedteam47s_StatusAroundTheSpoolLimit attacks the spool's switch from memory to its
// file: statuses of exactly 1 MB less one byte, 1 MB, and 1 MB and one byte (the whole
// answer, its newline included) must each decode to the engine's status, and leave nothing
// in the spool directory.
func TestRedteam47s_StatusAroundTheSpoolLimit(t *testing.T) {
	const limit = 1 << 20
	spool := t.TempDir()
	srv := &service.Server{Spool: spool}
	c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
	hc := rawHTTP(sock)
	ctx := t.Context()
	runs := 0
	// statusOf submits a padded plan and returns its run's status bytes once hold runs.
	statusOf := func(n, pad int) (string, []byte) {
		runs++
		sub, err := c.Submit(ctx, api.SubmitRequest{File: "p.json", Actor: "test", Source: paddedPlan(fmt.Sprintf("p%d", runs), n, pad)})
		if err != nil {
			t.Fatal(err)
		}
		agoratest.WaitFor(t, 30*time.Second, "hold to run", func() bool {
			r, err := srv.Engine.Summary(ctx, sub.Run.ID)
			return err == nil && r.Counts[lifecycle.TaskRunning] == 1
		})
		code, b := rawDo(t, hc, http.MethodGet, "/v1/runs/"+sub.Run.ID, nil)
		if code != http.StatusOK {
			t.Fatalf("status: %d %.300s", code, b)
		}
		return sub.Run.ID, b
	}
	_, probe := statusOf(1000, 0)
	perTask := len(probe) / 1000
	n := (limit - 20000) / perTask // a little under the limit, then padded up to it
	for _, target := range []int{limit - 1, limit, limit + 1} {
		pad := 0
		var id string
		var b []byte
		for try := 0; ; try++ {
			id, b = statusOf(n, pad)
			if len(b) == target {
				break
			}
			if try == 6 {
				t.Fatalf("no status of %d bytes: the last has %d", target, len(b))
			}
			pad += target - len(b)
			if pad < 0 || pad > 50*n {
				t.Fatalf("pad %d for a status of %d bytes", pad, target)
			}
		}
		want, err := srv.Engine.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		checkRunBytes(t, fmt.Sprintf("a status of %d bytes", target), b, false, want)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("the spool directory holds %v", left)
	}
}

// TestRedteam47s_SpoolThatCannotBeWritten attacks the spool's errors: with Spool a directory
// that is not there, or a file, a status too large for memory must be answered with an
// error (500, one JSON error naming the spool), never a 200 with part of a run; the watch's
// first read too; and the service goes on: a small run's status is answered whole.
func TestRedteam47s_SpoolThatCannotBeWritten(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "gone"), file} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			srv := &service.Server{Spool: dir}
			c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
			hc := rawHTTP(sock)
			ctx := t.Context()
			big, err := c.Submit(ctx, api.SubmitRequest{File: "big.json", Source: bigPlan(12000), Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			small, err := c.Submit(ctx, api.SubmitRequest{File: "small.json", Actor: "test",
				Source: []byte(`{"version": 1, "name": "small", "tasks": [{"id": "a", "subagent": "worker"}]}`)})
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"/v1/runs/" + big.Run.ID, "/v1/runs/" + big.Run.ID + "/watch", "/v1/runs/big"} {
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Errorf("%s: %v", path, p)
						}
					}()
					code, b := rawDo(t, hc, http.MethodGet, path, nil)
					var e api.Error
					dec := json.NewDecoder(bytes.NewReader(b))
					dec.DisallowUnknownFields()
					if code != http.StatusInternalServerError || dec.Decode(&e) != nil || e.Code != "internal" ||
						!strings.Contains(e.Error, dir) || dec.More() {
						t.Errorf("%s with the spool in %s: %d %.300q; want 500, one error naming the spool", path, dir, code, b)
					}
				}()
			}
			agoratest.WaitFor(t, 30*time.Second, "the small run to end", func() bool {
				r, err := c.Status(ctx, small.Run.ID)
				return err == nil && r.State == lifecycle.RunSucceeded && len(r.Tasks) == 1
			})
		})
	}
}

// TestRedteam47s_LargeStatusesAtOnce attacks the spool under concurrency: several clients
// read a large run's status (through the spool's file) and a small one's at once, and each
// gets its own run whole; nothing is left in the spool directory. Then watchers of the large
// run that stop reading after its first bytes, more than orch.db has connections, hold
// none: another run still ends and its status is answered.
func TestRedteam47s_LargeStatusesAtOnce(t *testing.T) {
	spool := t.TempDir()
	srv := &service.Server{Spool: spool}
	c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
	ctx := t.Context()
	big, err := c.Submit(ctx, api.SubmitRequest{File: "big.json", Source: bigPlan(12000), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	small, err := c.Submit(ctx, api.SubmitRequest{File: "small.json", Actor: "test",
		Source: []byte(`{"version": 1, "name": "small", "tasks": [{"id": "hold", "subagent": "worker"}, {"id": "b", "subagent": "worker"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	agoratest.WaitFor(t, 30*time.Second, "both holds to run", func() bool {
		a, err1 := srv.Engine.Summary(ctx, big.Run.ID)
		b, err2 := srv.Engine.Summary(ctx, small.Run.ID)
		return err1 == nil && err2 == nil && a.Counts[lifecycle.TaskRunning] == 1 && b.Counts[lifecycle.TaskRunning] == 1 &&
			b.Counts[lifecycle.TaskSucceeded] == 1
	})
	wantBig, err := srv.Engine.Status(ctx, big.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantSmall, err := srv.Engine.Status(ctx, small.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := rawHTTP(sock)
	var wg sync.WaitGroup
	type answer struct {
		what string
		code int
		b    []byte
		want api.Run
	}
	answers := make(chan answer, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, want := big.Run.ID, wantBig
			if i%4 == 3 {
				id, want = small.Run.ID, wantSmall
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://orch/v1/runs/"+id, nil)
			if err != nil {
				answers <- answer{what: err.Error()}
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				answers <- answer{what: err.Error()}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				answers <- answer{what: err.Error()}
				return
			}
			answers <- answer{what: fmt.Sprintf("client %d", i), code: resp.StatusCode, b: b, want: want}
		}()
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.code != http.StatusOK {
			t.Errorf("%s: %d %.200q", a.what, a.code, a.b)
			continue
		}
		checkRunBytes(t, a.what, a.b, false, a.want)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("the spool directory holds %v", left)
	}

	stallReaders(t, sock, "/v1/runs/"+big.Run.ID+"/watch", 6)
	anotherRunEnds(t, c)
}

// TestRedteam47s_NotFoundAnswers attacks the routes that now read through Summary or the
// spool: a run that is not there, by an id-like or a name-like ref, is answered 404
// not_found with the same message by the status, the watch, the audit route and an action,
// and the client's Status and Watch say not found.
func TestRedteam47s_NotFoundAnswers(t *testing.T) {
	srv := &service.Server{Spool: t.TempDir()}
	c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
	hc := rawHTTP(sock)
	for _, ref := range []string{"nope", "01M8N8BK053VJVF7XJ6YBK4ATV"} {
		var msgs []string
		for _, p := range []struct{ method, path string }{{http.MethodGet, ""}, {http.MethodGet, "/watch"}, {http.MethodGet, "/audit"}} {
			code, b := rawDo(t, hc, p.method, "/v1/runs/"+ref+p.path, nil)
			var e api.Error
			if code != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e.Code != "not_found" {
				t.Errorf("%s %s: %d %s", p.method, p.path, code, b)
			}
			msgs = append(msgs, e.Error)
		}
		code, b := rawDo(t, hc, http.MethodPost, "/v1/runs/"+ref+"/cancel", api.ActionRequest{Actor: "test"})
		var e api.Error
		if code != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e.Code != "not_found" {
			t.Errorf("cancel: %d %s", code, b)
		}
		for _, m := range msgs[1:] {
			if m != msgs[0] {
				t.Errorf("ref %s: not found as %q and as %q", ref, msgs[0], m)
			}
		}
		var ce *client.Error
		if _, err := c.Status(t.Context(), ref); !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Code != "not_found" {
			t.Errorf("client status of %s: %v", ref, err)
		}
		if err := c.Watch(t.Context(), ref, func(*api.Run, *api.Event) error { return nil }); !errors.As(err, &ce) ||
			ce.Status != http.StatusNotFound || ce.Code != "not_found" {
			t.Errorf("client watch of %s: %v", ref, err)
		}
	}
}

// TestRedteam47s_WatchByASharedName attacks the watch's first read, now a summary: asked for
// by a name two runs share, the watch's first line is the newer run, whole, with name_runs 2.
func TestRedteam47s_WatchByASharedName(t *testing.T) {
	srv := &service.Server{Spool: t.TempDir()}
	c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
	ctx := t.Context()
	var ids []string
	for i := range 2 {
		sub, err := c.Submit(ctx, api.SubmitRequest{File: "shared.json", Actor: "test", Source: []byte(fmt.Sprintf(`{"version": 1,
			"name": "shared", "concurrency": %d, "tasks": [{"id": "hold", "subagent": "worker"}, {"id": "b", "subagent": "worker"}]}`, i+1))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.Run.ID)
	}
	agoratest.WaitFor(t, 30*time.Second, "the newer run's tasks to settle", func() bool {
		r, err := srv.Engine.Summary(ctx, ids[1])
		return err == nil && r.Counts[lifecycle.TaskRunning] == 1 && r.Counts[lifecycle.TaskSucceeded] == 1
	})
	want, err := srv.Engine.Status(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if want.ID != ids[1] || want.NameRuns != 2 {
		t.Fatalf("the engine's status by name: run %s of %d", want.ID, want.NameRuns)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/runs/shared/watch HTTP/1.1\r\nHost: orch\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The body is left to conn.Close: closing it reads the stream to its end, and this run
	// does not end.
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	checkRunBytes(t, "the first watch line by name", line, true, want)
}

// TestRedteam47s_ActionDoneIsNotAnsweredFailed attacks an action's answer, now read through
// the spool: with Spool a directory that is not there, a cancel of a run too large for the
// spool's memory is applied by the engine, and then its answer (the run's status) cannot be
// spooled. An error answer must mean the action was not done: the test expects either a 2xx
// answer, or a run that was not cancelled.
func TestRedteam47s_ActionDoneIsNotAnsweredFailed(t *testing.T) {
	srv := &service.Server{Spool: filepath.Join(t.TempDir(), "gone")}
	c, sock := startServiceOn(t, holdExec{}, orch.Options{}, srv)
	ctx := t.Context()
	big, err := c.Submit(ctx, api.SubmitRequest{File: "big.json", Source: bigPlan(12000), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	code, b := rawDo(t, rawHTTP(sock), http.MethodPost, "/v1/runs/"+big.Run.ID+"/cancel", api.ActionRequest{Actor: "test"})
	r, err := srv.Engine.Summary(ctx, big.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if code/100 != 2 && (r.CancelAsked || r.State == lifecycle.RunCancelled) {
		t.Errorf("the cancel was answered %d %.200s, but the run is %s with its cancel asked %v: the caller is told it failed",
			code, b, r.State, r.CancelAsked)
	}
}
