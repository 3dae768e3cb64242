// Command agora-full is agora's whole command line: every command, its help and completion.
// People type `agora`, the small front (cmd/agora) installed beside this program: it hands
// `agora dispatch run` to a running `agora orch serve` itself and execs this program for
// everything else (a one-shot dispatch does not pay for the inits of every dependency).
package main

import (
	"os"

	"github.com/agora-dev/agora/internal/cli"
)

func main() { os.Exit(cli.Main()) }
