package dispatchcmd

import (
	"bytes"
	"strings"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// parseRun parses `agora dispatch run ARGS` and stops there: it returns the options the
// command would run with (nil on an error), and dispatches nothing.
func parseRun(args ...string) (*dispatchRunOptions, error) {
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, func(string) string { return "" })
	var got *dispatchRunOptions
	cmd := newDispatchRunCmd(f, func(o *dispatchRunOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return got, cmd.Execute()
}
