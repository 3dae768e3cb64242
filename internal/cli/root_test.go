package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli"
)

// An unknown command is a wrong command line: exit 2 with the usage hint, like every other
// usage error, and nothing written to AGORA_HOME.
func TestRun_UnknownCommandIsUsage(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"dispatch", "bogus"}} {
		var errOut bytes.Buffer
		home := t.TempDir() + "/home"
		f := cli.NewFactory(&cli.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errOut},
			func(k string) string {
				if k == "AGORA_HOME" {
					return home
				}
				return ""
			})
		code := cli.Run(t.Context(), f, args)
		f.Close()
		if code != cli.ExitUsage {
			t.Errorf("agora %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, cli.ExitUsage, errOut.String())
		}
		if !strings.Contains(errOut.String(), "--help' for usage") {
			t.Errorf("agora %s: no usage hint in:\n%s", strings.Join(args, " "), errOut.String())
		}
	}
}
