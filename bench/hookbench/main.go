// Command hookbench measures one Claude Code hook event's process, as claude runs it for every
// tool call: the worker program exec'd with its hook arguments, a real PreToolUse event on
// stdin, judging the call against the grant and reporting it to a gateway on a Unix socket
// (here a stub answering 204, as the real gateway does once the entry is recorded), to its
// exit. Each round runs the slim worker (`agora-worker worker hook`) and, with -base, the full
// agora binary (`agora worker hook`, the hook the full binary still has), interleaved, so
// both are read under the same load. The target: a hook event's process <= 12 ms.
//
//	make build && go run ./bench/hookbench -n 50 -base bin/agora
//
// It prints, per binary, its size, the number of packages with init work (GODEBUG=inittrace),
// and the median, p90 and min of the wall time and of the CPU time (user+system) per event.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// event is a PreToolUse event as Claude Code writes it on the hook's stdin.
const event = `{"session_id":"s-1","transcript_path":"/tmp/t.jsonl","cwd":"/agora/workspace",` +
	`"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls -la","description":"list"},` +
	`"tool_use_id":"toolu_01ABCDEFGHIJKLMNOPQRSTUV"}`

func main() {
	n := flag.Int("n", 50, "events per binary")
	bin := flag.String("bin", "bin/agora-worker", "the worker program")
	base := flag.String("base", "", "the full agora binary, measured in the same rounds as `agora worker hook`")
	flag.Parse()
	if err := run(*n, *bin, *base); err != nil {
		fmt.Fprintln(os.Stderr, "hookbench:", err)
		os.Exit(1)
	}
}

type subject struct {
	name, path string
	wall, cpu  []time.Duration
}

func run(n int, bin, base string) error {
	dir, err := os.MkdirTemp("", "hookbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "gateway.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	reports := 0
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/audit/tool" {
			reports++
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.NotFound(w, r)
	}))
	subjects := []*subject{{name: "agora-worker", path: bin}}
	if base != "" {
		subjects = append(subjects, &subject{name: "agora (full)", path: base})
	}
	args := []string{"worker", "hook", "--gateway", sock, "--tool", "Bash", "--command", "ls *"}
	for _, s := range subjects {
		if _, _, err := once(s.path, args, nil); err != nil { // warm the page cache
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	for range n {
		for _, s := range subjects {
			wall, cpu, err := once(s.path, args, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.wall, s.cpu = append(s.wall, wall), append(s.cpu, cpu)
		}
	}
	fmt.Printf("hook event (PreToolUse Bash, reported to a stub gateway), n=%d per binary, interleaved; %d reports\n", n, reports)
	fmt.Printf("%-14s %10s %6s %22s %22s\n", "binary", "size", "inits", "wall med/p90/min ms", "cpu med/p90/min ms")
	for _, s := range subjects {
		fi, err := os.Stat(s.path)
		if err != nil {
			return err
		}
		inits, err := countInits(s.path, args)
		if err != nil {
			return err
		}
		fmt.Printf("%-14s %8.1fMB %6d %22s %22s\n", s.name, float64(fi.Size())/1e6, inits, stats(s.wall), stats(s.cpu))
	}
	return nil
}

// once runs the hook with the event on stdin; it must exit 0 (the call allowed, reported).
func once(path string, args, env []string) (wall, cpu time.Duration, err error) {
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(event)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("hook: %v: %s", err, stderr.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return wall, cpu, nil
}

// countInits counts the packages the runtime traces as doing init work.
func countInits(path string, args []string) (int, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(event)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GODEBUG=inittrace=1"}
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("inittrace: %v", err)
	}
	n := 0
	for sc := bufio.NewScanner(&stderr); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "init ") {
			n++
		}
	}
	return n, nil
}

func stats(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("%.1f / %.1f / %.1f", ms(s[len(s)/2]), ms(s[len(s)*9/10]), ms(s[0]))
}
