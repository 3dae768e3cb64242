package local

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// probeEnv switches the test binary into a probe program. The tests bind the binary into
// sandboxes and run it there, so a probe needs nothing from the sandbox's /usr.
const probeEnv = "AGORA_LOCAL_PROBE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(probeEnv); mode != "" {
		os.Exit(probe(mode, os.Args[1:]))
	}
	if mode := os.Getenv(stageProbeEnv); mode != "" {
		os.Exit(stageProbe(mode, os.Args[1:]))
	}
	code := m.Run()
	if code == 0 {
		// The spawner's goroutine lives as long as the process, by design (spawn.go).
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/agora-dev/agora/internal/compute/local.spawnLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
		// Every sandbox was reaped: the test process has no children left, zombie or not.
		if kids := childrenOf(os.Getpid()); len(kids) > 0 {
			fmt.Fprintln(os.Stderr, "unreaped child processes:", kids)
			code = 1
		}
	}
	os.Exit(code)
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var kids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(n); err == nil && st.ppid == pid {
			kids = append(kids, n)
		}
	}
	return kids
}

// probe runs one probe and returns its exit code.
func probe(mode string, args []string) int {
	switch mode {
	case "connect":
		// connect ADDR: exit 0 if a TCP connection to ADDR succeeds.
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		c.Close()
		fmt.Println("connected")
		return 0
	case "netns":
		// netns: describe this process's network namespace (netnsProbe).
		return netnsProbe()
	case "netns47n":
		// netns47n SUBCOMMAND...: attacks on the network namespace made ahead (netns47nProbe).
		return netns47nProbe(args)
	case "env":
		// env: print the environment, one entry per line.
		fmt.Println(strings.Join(os.Environ(), "\n"))
		return 0
	default:
		fmt.Fprintln(os.Stderr, "unknown probe", mode)
		return 2
	}
}
