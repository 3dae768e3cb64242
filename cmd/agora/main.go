// Command agora is the command people type: a small front that links only what a one-shot
// hand-off and `agora version` need. `agora version` is answered here from agora-full's build
// information (version.go). `agora dispatch run`, when its flags are ones the front reads
// exactly and an `agora orch serve` of the same home listens, is handed to serve here; every
// other command line (help, completion, a flag the front does not read, no serve, a serve
// that declines) runs the whole program, agora-full, found beside this file (never on PATH,
// never from argv[0]), exec'd with the same argv and environment.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// fullName is the whole program, installed beside the front.
const fullName = "agora-full"

func main() {
	full, err := fullProgram()
	if err != nil {
		fmt.Fprintf(os.Stderr, "agora: error: %v\n", err)
		os.Exit(1)
	}
	if handled, err := answerVersion(full, os.Args[1:], os.Stdout); handled {
		if err != nil {
			fmt.Fprintf(os.Stderr, "agora: error: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if code, handled := tryHandoff(full, os.Args[1:]); handled {
		os.Exit(code)
	}
	execFull(full)
}

// fullProgram is agora-full beside the file this process runs (/proc/self/exe: symlinks
// resolved, so a symlinked `agora` finds the program beside its target, not beside the link).
func fullProgram() (string, error) {
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("find the agora program: %w", err)
	}
	full := filepath.Join(filepath.Dir(self), fullName)
	if _, err := os.Stat(full); err != nil {
		return "", fmt.Errorf("the agora program %s is missing beside %s (make install, or go install ./cmd/agora ./cmd/agora-full ./cmd/agora-worker): %w", fullName, self, err)
	}
	return full, nil
}

// execFull replaces this process by the whole program, with extra added to the environment.
func execFull(full string, extra ...string) {
	err := syscall.Exec(full, os.Args, append(os.Environ(), extra...))
	fmt.Fprintf(os.Stderr, "agora: error: run %s: %v\n", full, err)
	os.Exit(1)
}
