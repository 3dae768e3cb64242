package fdpass

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// helperEnv turns the test binary into `agora fdpass -- ARGS...`.
const helperEnv = "AGORA_FDPASS_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		fmt.Fprintln(os.Stderr, Exec(os.Args[1:], os.Environ()))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// fdpassCmd runs the helper with stdin and argv.
func fdpassCmd(t *testing.T, stdin []byte, argv ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, argv...)
	cmd.Env = []string{helperEnv + "=1", "PATH=/usr/bin:/bin"}
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd
}

func TestExec_SecretOnFD3(t *testing.T) {
	const secret = "fd3-secret-7e1f"
	cmd := fdpassCmd(t, []byte(secret), "sh", "-c", `
cat <&3; echo
echo "fd0=$(readlink /proc/self/fd/0)"
echo "fd3=$(readlink /proc/self/fd/3)"
(echo x >&3) 2>/dev/null && echo fd3write=ok || echo fd3write=refused
echo "stdin=$(cat | wc -c)"
tr '\0' ' ' </proc/$$/cmdline; echo
tr '\0' '\n' </proc/$$/environ | grep -c fd3-secret || true`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fdpass: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{secret + "\n", "fd0=/dev/null", "fd3=/memfd:agora-secrets", "fd3write=refused", "stdin=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	if strings.Count(got, secret) != 1 {
		t.Errorf("the secret appears %d times in %q: only cat <&3 may print it", strings.Count(got, secret), got)
	}
}

func TestExec_Empty(t *testing.T) {
	out, err := fdpassCmd(t, nil, "sh", "-c", `echo "n=$(wc -c <&3)"`).Output()
	if err != nil || !strings.Contains(string(out), "n=0") {
		t.Fatalf("empty stdin: %v %q", err, out)
	}
}

func TestExec_Refuses(t *testing.T) {
	big := bytes.Repeat([]byte("S"), MaxSize+1)
	for _, tc := range []struct {
		name  string
		stdin []byte
		argv  []string
		extra bool // something else already on fd 3
		want  string
	}{
		{name: "toolarge", stdin: big, argv: []string{"true"}, want: "over the 1048576 byte limit"},
		{name: "noprogram", stdin: []byte("x"), argv: nil, want: "no program"},
		{name: "notfound", stdin: []byte("x"), argv: []string{"no-such-program-here"}, want: "find"},
		{name: "fd3taken", stdin: []byte("x"), argv: []string{"true"}, extra: true, want: "refusing to replace it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := fdpassCmd(t, tc.stdin, tc.argv...)
			if tc.extra {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				defer w.Close()
				cmd.ExtraFiles = []*os.File{r}
			}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			if err == nil {
				t.Fatalf("fdpass succeeded, want %q", tc.want)
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q, want %q", errb.String(), tc.want)
			}
			if strings.Contains(errb.String(), "SSSS") {
				t.Error("stderr echoes stdin")
			}
		})
	}
}
