package agoratest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// MountsUnder lists the mount points at or below dir in this process's mount table: what a
// stage still holds mounted.
func MountsUnder(tb testing.TB, dir string) []string {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// AllThreadsTraced reports whether every thread of process pid has a tracer: strace, once
// attached, holds what a test injects into each of them.
func AllThreadsTraced(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/status")
		if err != nil {
			return false
		}
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "TracerPid:"); ok && strings.TrimSpace(v) == "0" {
				return false
			}
		}
	}
	return true
}
