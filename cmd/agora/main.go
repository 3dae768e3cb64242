// Command agora dispatches sandboxed AI sub-agents against a human-provisioned catalog.
package main

import (
	"os"

	"github.com/agora-dev/agora/internal/cli"
)

func main() { os.Exit(cli.Main()) }
