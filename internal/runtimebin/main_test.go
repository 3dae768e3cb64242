package runtimebin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestMain lets the test binary stand in for a native agent CLI: copied under the name
// "claude", "codex" or "hang" and run with --version, it answers like one (or hangs).
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		switch filepath.Base(os.Args[0]) {
		case "claude":
			fmt.Println("9.9.9 (Claude Code)")
			os.Exit(0)
		case "codex":
			fmt.Println("\ncodex-cli 1.2.3")
			os.Exit(0)
		case "hang":
			agoratest.Hang() // until --version's timeout kills it
		}
	}
	if args := os.Getenv("AGORA_TEST_EXECONLY"); args != "" {
		// TestRedTeam38_ExecOnlyKill9MidCopy's child: copy, to be killed meanwhile.
		dir, rest, _ := strings.Cut(args, "|")
		src, sum, _ := strings.Cut(rest, "|")
		if _, err := ExecOnly(dir, src, sum); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
