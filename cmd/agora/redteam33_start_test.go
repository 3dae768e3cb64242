package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRedTeam33_StartDialsNothing: the front, agora-full and agora-worker, started for
// commands that need no network (version, help, completion, a usage error), dial nothing
// whatever the environment points them at: the tracing exporter (OTEL_*), a docker engine
// (DOCKER_HOST), proxies, an in-cluster API server, all aimed at listeners here that count
// every connection. With strace on the machine, no socket is even made (the front links few
// packages; a dependency that dials or opens a socket at init would show here).
func TestRedTeam33_StartDialsNothing(t *testing.T) {
	var dials atomic.Int64
	count := func(l net.Listener) {
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				dials.Add(1)
				c.Close()
			}
		}()
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	count(tcp)
	sock := filepath.Join(t.TempDir(), "docker.sock")
	unixL, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	count(unixL)
	addr := tcp.Addr().String()
	host, port, _ := net.SplitHostPort(addr)
	env := append((&fakeServe{home: filepath.Join(t.TempDir(), "home")}).env(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+addr, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+addr+"/v1/traces",
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_METRICS_EXPORTER=otlp", "OTEL_LOGS_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"DOCKER_HOST=unix://"+sock, "HTTP_PROXY=http://"+addr, "HTTPS_PROXY=http://"+addr, "ALL_PROXY=socks5://"+addr,
		"NO_PROXY=", "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port, "GODEBUG=")
	dir := filepath.Dir(agoraBin)
	_, haveStrace := exec.LookPath("strace")
	for _, c := range []struct {
		bin  string
		args []string
	}{
		{"agora", []string{"version"}},
		{"agora", []string{"--help"}},
		{"agora", []string{"dispatch", "run", "--help"}},
		{"agora", []string{"completion", "bash"}},
		{"agora", []string{"dispatch", "run", "--bogus"}},
		{"agora", []string{"nosuchcommand"}},
		{fullName, []string{"version"}},
		{fullName, []string{"--help"}},
		{"agora-worker", nil},
		{"agora-worker", []string{"nosuchcommand"}},
	} {
		t.Run(c.bin+" "+strings.Join(c.args, " "), func(t *testing.T) {
			before := dials.Load()
			cmd := exec.Command(filepath.Join(dir, c.bin), c.args...)
			cmd.Env = env
			got := run(t, cmd)
			if n := dials.Load() - before; n != 0 {
				t.Errorf("%d connections to the endpoints the environment names (exit %d)", n, got.code)
			}
			if haveStrace != nil {
				t.Skip("SKIP: strace is not installed: the no-socket check did not run (the listeners' did)")
			}
			trace := filepath.Join(t.TempDir(), "strace")
			st := exec.Command("strace", append([]string{"-f", "-qq", "-e", "signal=none", "-o", trace, "-e", "trace=socket,connect", filepath.Join(dir, c.bin)}, c.args...)...)
			st.Env = env
			run(t, st)
			b, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			// Only the calls count: strace also writes signals (SIGURG: the Go runtime's
			// preemption) and a thread it lost ("???( <detached ...>").
			var calls []string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "socket(") || strings.Contains(line, "connect(") {
					calls = append(calls, line)
				}
			}
			if len(calls) > 0 {
				t.Errorf("sockets made at start:\n%s", strings.Join(calls, "\n"))
			}
		})
	}
}
