package orch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/runread"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// watchTick is how often orch watch refreshes: the run's tasks, and each running task's
// elapsed time, phase and last output line.
const watchTick = time.Second

var errStopWatch = errors.New("stop watching")

// taskProgress is a running task as orch watch shows it (and prints in -o json lines).
type taskProgress struct {
	Task       string `json:"task"`
	DispatchID string `json:"dispatch_id,omitempty"`
	// ElapsedMS is how long the task has been running, as this watcher saw it fire (or
	// since it started watching).
	ElapsedMS int64  `json:"elapsed_ms"`
	Phase     string `json:"phase,omitempty"`
	LastLine  string `json:"last_line,omitempty"`
}

// watchLine is one line of `orch watch -o json`: exactly one field is set.
type watchLine struct {
	Run      *api.Run       `json:"run,omitempty"`
	Event    *api.Event     `json:"event,omitempty"`
	Progress []taskProgress `json:"progress,omitempty"`
}

// runWatcher follows one run: the service's stream of changes, and a refresh each tick.
type runWatcher struct {
	ctx      context.Context // the watch's: reading a question's options from its record
	f        *cmdutil.Factory
	c        *client.Client
	out      io.Writer
	live     bool // redraw a table in place (a terminal)
	jsonl    bool // one JSON object per line
	stateDir string

	mu      sync.Mutex // guards the fields below: the stream and the ticker both update them
	last    api.Run
	drawn   int
	running map[string]time.Time // task -> when it was seen to start running
	shown   map[string]taskProgress
}

// watchRun follows a run and turns its outcome into the exit code.
func watchRun(ctx context.Context, f *cmdutil.Factory, ref string, out io.Writer, live, jsonl bool) error {
	c, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	dir, err := f.HomeDir()
	if err != nil {
		return err
	}
	w := &runWatcher{ctx: ctx, f: f, c: c, out: out, live: live && !jsonl, jsonl: jsonl,
		stateDir: filepath.Join(dir, home.DispatchDir), running: map[string]time.Time{}, shown: map[string]taskProgress{}}
	tickCtx, stopTick := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.tick(tickCtx, ref) })
	err = c.Watch(ctx, ref, w.update)
	stopTick()
	wg.Wait()
	last := w.last
	if err != nil && ctx.Err() != nil {
		id := cmp.Or(last.ID, ref)
		return cmdutil.Interrupted("stopped watching; nothing changed: run %s keeps running in 'agora orch serve' (follow it again with 'agora orch watch %s', stop it with 'agora orch cancel %s')", id, id, id)
	}
	if err != nil && !errors.Is(err, errStopWatch) {
		return err
	}
	if !w.live && !jsonl {
		printRunHeader(f, last)
	}
	switch last.State {
	case lifecycle.RunSucceeded:
		return nil
	case lifecycle.RunNeedsInput:
		for _, t := range last.Tasks {
			if t.State == lifecycle.TaskNeedsInput {
				fmt.Fprintf(f.IO.ErrOut, "agora: task %s asks: %s\n  -> %s\n", t.ID, cmdutil.AgentText(t.Question), api.AnswerCommand(last.ID, t.ID))
			}
		}
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitNeedsInput}
	default:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitWorkerFail}
	}
}

// update is the stream's callback: a run's state, or one event.
func (w *runWatcher) update(r *api.Run, ev *api.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev != nil {
		w.event(ev)
	}
	if r == nil {
		if w.live {
			w.draw()
		}
		return nil
	}
	if w.last.ID == "" {
		runread.NoteShared(w.f, *r) // the first status: ref resolved
	}
	w.setRun(*r)
	if w.jsonl {
		// The run as status shows it: a question's options filled in.
		shown := withOptions(w.ctx, w.f, *r)
		w.writeLine(watchLine{Run: &shown})
	}
	if w.live {
		w.draw()
	}
	if r.State == lifecycle.RunNeedsInput {
		return errStopWatch
	}
	return nil
}

func (w *runWatcher) event(ev *api.Event) {
	if ev.Task != "" && ev.State == lifecycle.TaskRunning {
		if _, ok := w.running[ev.Task]; !ok {
			w.running[ev.Task] = ev.At
		}
	}
	switch {
	case w.jsonl:
		w.writeLine(watchLine{Event: ev})
	case !w.live:
		fmt.Fprintf(w.out, "%s\t%s\t%s\t%s\t%s\n", ev.At.UTC().Format(time.RFC3339), cmdutil.OrDash(ev.Task),
			strings.TrimPrefix(ev.Kind, entry.OrchPrefix), ev.State, cmdutil.AgentText(ev.Detail))
	}
	if ev.Task == "" {
		return
	}
	for i := range w.last.Tasks {
		if t := &w.last.Tasks[i]; t.ID == ev.Task && t.State != ev.State {
			w.last.Counts[t.State]--
			t.State = ev.State
			w.last.Counts[ev.State]++
		}
	}
}

// setRun takes r as the run's state and notes when its running tasks started.
func (w *runWatcher) setRun(r api.Run) {
	w.last = r
	now := w.f.Now()
	for _, t := range r.Tasks {
		if t.State != lifecycle.TaskRunning {
			delete(w.running, t.ID)
			continue
		}
		if _, ok := w.running[t.ID]; !ok {
			w.running[t.ID] = now
		}
	}
}

// tick refreshes the run each second until ctx ends: the stream carries changes only, and
// a running task's phase and output are not changes of the run.
func (w *runWatcher) tick(ctx context.Context, ref string) {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := w.c.Status(ctx, ref)
		w.mu.Lock()
		if err == nil && r.ID != "" && !(w.last.ID != "" && lifecycle.RunEnded(w.last.State)) {
			w.setRun(r)
		}
		w.progress()
		w.mu.Unlock()
	}
}

// progress shows what the running tasks are doing: redrawn on a terminal, else a line for
// each task whose phase or last output line changed.
func (w *runWatcher) progress() {
	if w.live {
		w.draw()
		return
	}
	var changed []taskProgress
	for _, p := range w.tasks() {
		old, ok := w.shown[p.Task]
		w.shown[p.Task] = p
		if !ok || old.Phase != p.Phase || old.LastLine != p.LastLine {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		return
	}
	if w.jsonl {
		w.writeLine(watchLine{Progress: changed})
		return
	}
	for _, p := range changed {
		fmt.Fprintf(w.out, "%s\t%s\tprogress\t%s\t%s %s\n", w.f.Now().UTC().Format(time.RFC3339), p.Task, cmdutil.OrDash(p.Phase),
			time.Duration(p.ElapsedMS)*time.Millisecond, cmdutil.Truncate(cmdutil.AgentText(p.LastLine), 120))
	}
}

// tasks is the progress of the running tasks, in plan order.
func (w *runWatcher) tasks() []taskProgress {
	d := &dispatch.Dispatcher{StateDir: w.stateDir}
	now := w.f.Now()
	var out []taskProgress
	for _, t := range w.last.Tasks {
		if t.State != lifecycle.TaskRunning {
			continue
		}
		p := taskProgress{Task: t.ID, DispatchID: t.DispatchID}
		if at, ok := w.running[t.ID]; ok {
			p.ElapsedMS = now.Sub(at).Milliseconds()
		}
		if t.DispatchID != "" {
			l := d.Live(t.DispatchID)
			p.Phase, p.LastLine = l.Phase, l.LastLine
		}
		out = append(out, p)
	}
	return out
}

func (w *runWatcher) writeLine(l watchLine) {
	b, err := json.Marshal(l)
	if err == nil {
		fmt.Fprintf(w.out, "%s\n", b)
	}
}

// draw redraws the run's table in place on a terminal.
func (w *runWatcher) draw() {
	r := w.last
	var b strings.Builder
	if w.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", w.drawn)
	}
	done, total := doneTasks(r), max(r.Total, 1)
	const width = 30
	fill := min(done*width/total, width)
	fmt.Fprintf(&b, "%s (%s) %s [%s%s] %d/%d\n", r.Name, r.ID, r.State, strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, r.Total)
	lines := 1
	progress := map[string]taskProgress{}
	for _, p := range w.tasks() {
		progress[p.Task] = p
	}
	shown := r.Tasks
	if len(shown) > 40 {
		// Show the tasks that are doing something; the counts cover the rest.
		var active []api.Task
		for _, t := range shown {
			if t.State == lifecycle.TaskRunning || t.State == lifecycle.TaskReady || t.State == lifecycle.TaskNeedsInput || t.State == lifecycle.TaskFailed {
				active = append(active, t)
			}
		}
		shown = active[:min(len(active), 40)]
	}
	for _, t := range shown {
		fmt.Fprintf(&b, "  %-24s %-12s %s", cmdutil.Truncate(t.ID, 24), t.State, cmdutil.OrDash(t.DispatchID))
		if p, ok := progress[t.ID]; ok {
			fmt.Fprintf(&b, "  %s %s", cmdutil.OrDash(p.Phase), (time.Duration(p.ElapsedMS) * time.Millisecond).Round(time.Second))
			if p.LastLine != "" {
				fmt.Fprintf(&b, "  | %s", cmdutil.Truncate(cmdutil.AgentText(p.LastLine), 60))
			}
		}
		b.WriteString("\n")
		lines++
	}
	fmt.Fprint(w.out, b.String())
	w.drawn = lines
}
