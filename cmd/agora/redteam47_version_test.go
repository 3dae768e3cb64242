package main

// `agora version` answered by the front from agora-full's build information
// (version.go). The invariant every test here holds the front to: whatever agora-full is and
// whatever the command line, the front ends exactly as exec'ing agora-full would (stdout,
// stderr, exit code), and it never hangs where the exec would not.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rt47Front copies the front into a new directory and returns the directory and the copy: the
// test then puts whatever it likes at dir/agora-full.
func rt47Front(t *testing.T) (dir, self string) {
	t.Helper()
	dir = t.TempDir()
	self = filepath.Join(dir, "agora")
	copyFile(t, agoraBin, self, 0o755)
	return dir, self
}

// rt47ExecWould is how the front ends when it execs path (its fall-through): the program's own
// result, or, when the kernel refuses to start it, execFull's message and exit 1.
func rt47ExecWould(t *testing.T, path, argv0 string, env []string, args ...string) result {
	t.Helper()
	c := exec.Command(path, args...)
	c.Args[0] = argv0
	c.Env = env
	c.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var ee *exec.ExitError
	var errno syscall.Errno
	switch {
	case err == nil:
		return result{0, out.String(), errOut.String()}
	case errors.As(err, &ee):
		return result{ee.ExitCode(), out.String(), errOut.String()}
	case errors.As(err, &errno):
		return result{1, "", fmt.Sprintf("agora: error: run %s: %v\n", path, errno)}
	}
	t.Fatal(err)
	return result{}
}

// rt47FrontVsExec runs the front in dir with args and asserts it ends as exec'ing dir's
// agora-full would.
func rt47FrontVsExec(t *testing.T, self string, args ...string) result {
	t.Helper()
	c := exec.Command(self, args...)
	c.Dir = t.TempDir()
	got := run(t, c)
	want := rt47ExecWould(t, filepath.Join(filepath.Dir(self), fullName), self, os.Environ(), args...)
	if got != want {
		t.Errorf("agora %q: the front ended\n  %+v\nexec'ing agora-full would end\n  %+v", args, got, want)
	}
	return got
}

// rt47Fake builds, in a module that calls itself github.com/agora-dev/agora, a program at
// cmd/agora-full that answers `version` exactly as agora-full's versionRun does (this
// checkout's internal/version over runtime/debug.ReadBuildInfo): a stand-in for agora-full
// built another way (another GOARCH, no module information) at the cost of a tiny program.
func rt47Fake(t *testing.T, env []string, flags ...string) string {
	t.Helper()
	mod := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "internal", "version", "version.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":                      "module github.com/agora-dev/agora\n\ngo 1.21\n",
		"internal/version/version.go": string(src),
		"cmd/agora-full/main.go": `package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/agora-dev/agora/internal/version"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "version" {
		fmt.Fprintln(os.Stderr, "fake agora-full: only version")
		os.Exit(2)
	}
	bi, _ := debug.ReadBuildInfo()
	if _, err := io.WriteString(os.Stdout, version.From(bi).Text()); err != nil {
		fmt.Fprintf(os.Stderr, "agora: error: %v\n", err)
		os.Exit(1)
	}
}
`,
	}
	for name, body := range files {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "fake-agora-full")
	args := append(append([]string{"-n", "10", "go", "build", "-trimpath"}, flags...), "-o", out, "./cmd/agora-full")
	build := exec.Command("nice", args...)
	if _, err := exec.LookPath("nice"); err != nil {
		build = exec.Command(args[2], args[3:]...)
	}
	build.Dir = mod
	build.Env = append(os.Environ(), append([]string{"CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local"}, env...)...)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the fake agora-full: %v\n%s", err, b)
	}
	return out
}

// TestRedTeam47_CommandLines tries command lines around the ones the front answers (flags
// before the command, repeated or joined -o, `--`, spacing, case, Unicode look-alikes, empty
// values, help) against the real agora-full. Expect: each ends, byte for byte, as agora-full
// run directly ends; the forms the front answers are answered as agora-full answers them and
// the rest reach agora-full, so its usage errors and help are its own.
func TestRedTeam47_CommandLines(t *testing.T) {
	for _, args := range [][]string{
		{"version"}, {"version", "-o", "json"}, {"version", "-o", "table"}, {"version", "--output", "json"},
		{"version", "--output=json"}, {"version", "--output=table"},
		{"version", "-o", "json", "-o", "json"}, {"version", "-o", "json", "-o", "table"}, {"version", "--output=json", "--output=json"},
		{"version", "-ojson"}, {"version", "-o=json"}, {"version", "--output=JSON"}, {"version", "-o", "Json"},
		{"version", "--output="}, {"version", "--output", ""}, {"version", "-o", ""}, {"version", "-o"}, {"version", "--output"},
		{"version", "--output=json=json"}, {"version", "--output= json"}, {"version", "-o", " json"}, {"version", "-o", "json "},
		{"version", "---output=json"}, {"version", "--out", "json"}, {"version", "-o", "-o"}, {"version", "-o", "--output=json"},
		{"version", "--"}, {"version", "--", "-o", "json"}, {"version", "-o", "json", "--"}, {"version", ""},
		{"version", "extra"}, {"version", "-o", "json", "extra"}, {"version", "--help"}, {"version", "-h"}, {"help", "version"},
		{"--actor", "x", "version"}, {"--actor=x", "version"}, {"version", "--actor", "x"}, {"version", "--actor=x", "-o", "json"},
		{" version"}, {"version "}, {"VERSION"}, {"Version"}, {"versio"}, {"versions"}, {"v\u0435rsion"},
		{"vers\u0131on"}, {"\uff56ersion"}, {"version\u200b"}, {"version", "\u2212o", "json"}, {"version", "-o", "\uff4aSON"},
		{"version", "-o", "json\xff"}, {"version\xff"},
	} {
		t.Run(fmt.Sprintf("%q", args), func(t *testing.T) {
			want := full(t, os.Environ(), args...)
			got := run(t, exec.Command(agoraBin, args...))
			if got != want {
				t.Errorf("the front ended\n  %+v\nagora-full ended\n  %+v", got, want)
			}
		})
	}
}

// TestRedTeam47_Environment: variables agora-full reads or the Go runtime reads (a missing or
// relative AGORA_HOME, tracing, GODEBUG, a locale) do not make agora-full's `version` print
// anything the front's answer lacks. Expect: identical bytes and exit codes. (GODEBUG=inittrace=1
// is left out on purpose: it prints each program's own package inits, which the front exists
// not to run; that difference is the feature.)
func TestRedTeam47_Environment(t *testing.T) {
	for _, kv := range [][]string{
		{"AGORA_HOME=/nonexistent/agora-home"}, {"AGORA_HOME=relative"}, {"AGORA_HOME="},
		{"TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_EXPORTER=otlp"},
		{"GODEBUG=panicnil=1,asyncpreemptoff=1"}, {"GOTRACEBACK=crash"}, {"LANG=tr_TR.UTF-8", "LC_ALL=tr_TR.UTF-8"},
		{"NO_COLOR=1", "TERM=dumb"}, {"COLUMNS=1"},
	} {
		for _, args := range [][]string{{"version"}, {"version", "-o", "json"}} {
			t.Run(fmt.Sprintf("%q %q", kv, args), func(t *testing.T) {
				env := append(os.Environ(), kv...)
				want := full(t, env, args...)
				c := exec.Command(agoraBin, args...)
				c.Env = env
				if got := run(t, c); got != want {
					t.Errorf("the front ended\n  %+v\nagora-full ended\n  %+v", got, want)
				}
			})
		}
	}
}

// TestRedTeam47_StdoutFails: stdout that cannot be written (/dev/full, a pipe nobody reads, a
// closed descriptor). Expect: the front ends as agora-full does: the same error line and exit
// code for /dev/full, the same death by SIGPIPE, the same silence for a closed stdout.
func TestRedTeam47_StdoutFails(t *testing.T) {
	fullBin := filepath.Join(filepath.Dir(agoraBin), fullName)
	for _, args := range [][]string{{"version"}, {"version", "--output=json"}} {
		t.Run("dev full "+strings.Join(args, " "), func(t *testing.T) {
			ends := func(prog string) result {
				f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
				if err != nil {
					t.Skipf("SKIP: %v", err)
				}
				defer f.Close()
				c := exec.Command(prog, args...)
				c.Args[0] = "agora"
				c.Stdout = f
				var errOut bytes.Buffer
				c.Stderr = &errOut
				err = c.Run()
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatal(err)
				}
				return result{c.ProcessState.ExitCode(), "", errOut.String()}
			}
			got, want := ends(agoraBin), ends(fullBin)
			if got != want || want.code != 1 {
				t.Errorf("to /dev/full the front ended %+v, agora-full %+v", got, want)
			}
		})
		t.Run("broken pipe "+strings.Join(args, " "), func(t *testing.T) {
			ends := func(prog string) string {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
				defer w.Close()
				c := exec.Command(prog, args...)
				c.Stdout = w
				var errOut bytes.Buffer
				c.Stderr = &errOut
				c.Run()
				return fmt.Sprintf("%v %q", c.ProcessState, errOut.String())
			}
			if got, want := ends(agoraBin), ends(fullBin); got != want {
				t.Errorf("into a broken pipe the front ended %s, agora-full %s", got, want)
			}
		})
		t.Run("closed stdout "+strings.Join(args, " "), func(t *testing.T) {
			ends := func(prog string) result {
				return run(t, exec.Command("sh", append([]string{"-c", `exec "$0" "$@" >&-`, prog}, args...)...))
			}
			if got, want := ends(agoraBin), ends(fullBin); got != want {
				t.Errorf("with stdout closed the front ended %+v, agora-full %+v", got, want)
			}
		})
	}
}

// TestRedTeam47_OddFiles: agora-full is not a Go program the front can read: an empty file, a
// directory, a C program (/bin/true), the first MiB of the real agora-full (a truncated ELF),
// a character device (a symlink to /dev/zero), and a crafted ELF whose Go build-info header
// claims a module string of 2^62 bytes. Expect: no panic, no allocation of the claimed size;
// the front falls through to exec and ends exactly as that exec would.
func TestRedTeam47_OddFiles(t *testing.T) {
	real, err := os.ReadFile(filepath.Join(filepath.Dir(agoraBin), fullName))
	if err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(t *testing.T, p string){
		"empty":     func(t *testing.T, p string) { rt47Write(t, p, nil) },
		"directory": func(t *testing.T, p string) { rt47Must(t, os.Mkdir(p, 0o755)) },
		"a C program": func(t *testing.T, p string) {
			b, err := os.ReadFile("/bin/true")
			if err != nil {
				t.Skipf("SKIP: %v", err)
			}
			rt47Write(t, p, b)
		},
		"truncated ELF":            func(t *testing.T, p string) { rt47Write(t, p, real[:1<<20]) },
		"symlink to /dev/zero":     func(t *testing.T, p string) { rt47Must(t, os.Symlink("/dev/zero", p)) },
		"oversized build info ELF": func(t *testing.T, p string) { rt47Write(t, p, rt47CraftedELF(1<<62)) },
	} {
		t.Run(name, func(t *testing.T) {
			dir, self := rt47Front(t)
			plant(t, filepath.Join(dir, fullName))
			for _, args := range [][]string{{"version"}, {"version", "-o", "json"}} {
				rt47FrontVsExec(t, self, args...)
			}
		})
	}
}

func rt47Write(t *testing.T, p string, b []byte) { rt47Must(t, os.WriteFile(p, b, 0o755)) }

func rt47Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// rt47CraftedELF is a minimal ELF64 with one writable PT_LOAD segment holding a Go build-info
// header (1.18+ inline form) whose version string is "go1.99" and whose module string claims
// modLen bytes.
func rt47CraftedELF(modLen uint64) []byte {
	const base = 0x400000
	b := make([]byte, 0x1000)
	copy(b, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2)    // ET_EXEC
	le.PutUint16(b[18:], 62)   // EM_X86_64
	le.PutUint32(b[20:], 1)    // EV_CURRENT
	le.PutUint64(b[24:], base) // entry
	le.PutUint64(b[32:], 64)   // phoff
	le.PutUint16(b[52:], 64)   // ehsize
	le.PutUint16(b[54:], 56)   // phentsize
	le.PutUint16(b[56:], 1)    // phnum
	le.PutUint16(b[58:], 64)   // shentsize
	ph := b[64:]
	le.PutUint32(ph[0:], 1) // PT_LOAD
	le.PutUint32(ph[4:], 6) // PF_R|PF_W
	le.PutUint64(ph[16:], base)
	le.PutUint64(ph[24:], base)
	le.PutUint64(ph[32:], uint64(len(b)))
	le.PutUint64(ph[40:], uint64(len(b)))
	le.PutUint64(ph[48:], 0x1000)
	bi := b[0x200:]
	copy(bi, "\xff Go buildinf:")
	bi[14], bi[15] = 8, 2 // pointer size, inline strings
	n := copy(bi[32:], "\x06go1.99")
	binary.PutUvarint(bi[32+n:], modLen)
	return b
}

// TestRedTeam47_FIFO: agora-full is a FIFO (or anything else whose open blocks). exec'ing it
// fails at once (permission denied: not a regular file), so every other command ends at once.
// Expect: `agora version` ends the same way within seconds; the hole is an open of
// agora-full for reading that waits forever for a writer.
func TestRedTeam47_FIFO(t *testing.T) {
	dir, self := rt47Front(t)
	if err := syscall.Mkfifo(filepath.Join(dir, fullName), 0o755); err != nil {
		t.Skipf("SKIP: mkfifo: %v", err)
	}
	want := result{1, "", "agora: error: run " + filepath.Join(dir, fullName) + ": permission denied\n"}
	if got := run(t, exec.Command(self, "help")); got != want {
		t.Fatalf("agora help with a FIFO agora-full: %+v, want %+v", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, self, "version")
	c.WaitDelay = time.Second
	start := time.Now()
	got := run(t, c)
	if ctx.Err() != nil {
		t.Fatalf("agora version with a FIFO as agora-full hung (killed after %v): %+v", time.Since(start).Round(time.Second), got)
	}
	if got != want {
		t.Errorf("agora version with a FIFO agora-full: %+v, want %+v", got, want)
	}
}

// TestRedTeam47_NotAgoraFull: agora-full is another Go program (a symlink to the toolchain's
// gofmt, as a mistaken install or a Go-built wrapper would leave it). exec'ing it runs gofmt,
// which knows no `version`. Expect: the front ends as gofmt does; the hole is the front
// printing "agora unknown ... go1.x" as agora's version from a program that is not agora.
func TestRedTeam47_NotAgoraFull(t *testing.T) {
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("SKIP: go env GOROOT: %v", err)
	}
	gofmt := filepath.Join(strings.TrimSpace(string(root)), "bin", "gofmt")
	if _, err := os.Stat(gofmt); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	dir, self := rt47Front(t)
	rt47Must(t, os.Symlink(gofmt, filepath.Join(dir, fullName)))
	for _, args := range [][]string{{"version"}, {"version", "-o", "json"}} {
		rt47FrontVsExec(t, self, args...)
	}
}

// TestRedTeam47_OtherArchitecture: agora-full built for another architecture (the wrong
// release archive unpacked over an install: an arm64 agora-full beside an amd64 front). Every
// command fails with "exec format error". Expect: `agora version` fails the same way; the
// hole is the front printing a version, telling the user the install works when no agora
// command can run.
func TestRedTeam47_OtherArchitecture(t *testing.T) {
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if other == "" {
		t.Skipf("SKIP: no other architecture chosen for %s", runtime.GOARCH)
	}
	fake := rt47Fake(t, []string{"GOARCH=" + other})
	dir, self := rt47Front(t)
	copyFile(t, fake, filepath.Join(dir, fullName), 0o755)
	rt47FrontVsExec(t, self, "version")
}

// TestRedTeam47_NoModuleInfo: an agora-full whose build information holds the Go version but
// no module information (a GOPATH-mode or Bazel build; here -X runtime.modinfo=): its
// debug.ReadBuildInfo reports nothing, so agora-full prints "unknown" for the Go version too,
// while debug/buildinfo.ReadFile still returns the Go version with an empty module. Control:
// the same fake built normally. Expect: the front prints what the fake prints.
func TestRedTeam47_NoModuleInfo(t *testing.T) {
	for name, flags := range map[string][]string{
		"control":        nil,
		"no module info": {"-ldflags=-X=runtime.modinfo="},
	} {
		t.Run(name, func(t *testing.T) {
			fake := rt47Fake(t, nil, flags...)
			dir, self := rt47Front(t)
			copyFile(t, fake, filepath.Join(dir, fullName), 0o755)
			rt47FrontVsExec(t, self, "version")
		})
	}
}

// TestRedTeam47_SymlinkedCraftedBuildInfo: agora-full is a symlink into a directory another
// party controls, to a copy of the real agora-full whose module version (in both the copy the
// runtime reads and the build-info blob the front reads) is rewritten, same length, into a
// terminal escape sequence. Expect: the front reads the file the exec would run and prints
// the same bytes agora-full prints, escape included (neither sanitises; whoever writes the
// file could as well make it run anything), and nothing when agora-full is not the file.
func TestRedTeam47_SymlinkedCraftedBuildInfo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(agoraBin), fullName))
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("mod\tgithub.com/agora-dev/agora\t")
	i := bytes.Index(b, prefix)
	if i < 0 {
		t.Skip("SKIP: agora-full's module line not found")
	}
	v := b[i+len(prefix):]
	v = v[:bytes.IndexByte(v, '\t')]
	if len(v) < 7 {
		t.Skipf("SKIP: module version %q too short to rewrite", v)
	}
	crafted := []byte("\x1b]0;X\x07" + strings.Repeat("y", len(v)-6))
	old := append(append(append([]byte{}, prefix...), v...), '\t')
	if n := bytes.Count(b, old); n != 2 {
		t.Skipf("SKIP: the module line occurs %d times, not twice (runtime.modinfo and the build-info blob)", n)
	}
	b = bytes.ReplaceAll(b, old, append(append(append([]byte{}, prefix...), crafted...), '\t'))
	evil := t.TempDir()
	target := filepath.Join(evil, "anything")
	rt47Write(t, target, b)
	dir, self := rt47Front(t)
	rt47Must(t, os.Symlink(target, filepath.Join(dir, fullName)))
	for _, args := range [][]string{{"version"}, {"version", "-o", "json"}} {
		got := rt47FrontVsExec(t, self, args...)
		if !strings.Contains(got.out, "\x1b]0;X") && !strings.Contains(got.out, `\u001b]0;X`) {
			t.Errorf("agora %v: the crafted version is not what was printed: %+v", args, got)
		}
	}
}
