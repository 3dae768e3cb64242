package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

func TestDoctor_ThisHost(t *testing.T) {
	home := filepath.Join(t.TempDir(), "no-such-home")
	var out, errOut bytes.Buffer
	f := NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func(k string) string {
		return map[string]string{"AGORA_HOME": home, "HOME": home}[k]
	})
	defer f.Close()
	code := Run(t.Context(), f, []string{"doctor", "--output", "json"})
	var res struct {
		CanDispatch bool `json:"can_dispatch"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("stdout: %v\n%s", err, out.String())
	}
	if (code == cmdutil.ExitOK) != res.CanDispatch {
		t.Errorf("exit %d with can_dispatch %v (stderr %q)", code, res.CanDispatch, errOut.String())
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("doctor created AGORA_HOME (%v)", err)
	}
}
