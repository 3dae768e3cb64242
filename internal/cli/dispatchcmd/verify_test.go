package dispatchcmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestNewDispatchRunCmd_Verify maps --verify, --verify-timeout and --protect to the
// request's gate, stopping after parsing; a line that is not one simple command is refused.
func TestNewDispatchRunCmd_Verify(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    *verdict.Spec
		wantErr string
	}{
		{args: nil},
		{args: []string{"--verify", "go test ./..."}, want: &verdict.Spec{Command: []string{"go", "test", "./..."}}},
		{args: []string{"--verify", "make 'check all'", "--verify-timeout", "90s", "--protect", "**/*_test.go", "--protect", ".github/**"},
			want: &verdict.Spec{Command: []string{"make", "check all"}, Timeout: 90 * time.Second, Protect: []string{"**/*_test.go", ".github/**"}}},
		{args: []string{"--verify", "go test ./... | tee log"}, wantErr: "one simple command"},
		{args: []string{"--verify", "go test $PKG"}, wantErr: "one simple command"},
		{args: []string{"--verify", ""}, wantErr: "--verify"},
		{args: []string{"--protect", "**/*_test.go"}, wantErr: "--protect needs --verify"},
		{args: []string{"--verify-timeout", "1m"}, wantErr: "--verify-timeout needs --verify"},
		{args: []string{"--changes", "src/**"}, wantErr: "--changes needs --verify"},
		{args: []string{"--expect-junit", "j.xml"}, wantErr: "--expect-junit needs --verify"},
		{args: []string{"--verify", "true", "--expect-min-tests", "2"}, wantErr: "--expect-min-tests needs --expect-junit"},
		{args: []string{"--verify", "true", "--expect-junit", "j.xml", "--expect-min-tests", "0"}, wantErr: "at least 1"},
		{args: []string{"--verify", "true", "--expect-junit", "a/j.xml"}, wantErr: "file name"},
		{args: []string{"--verify", "true", "--changes", "src/**", "--changes", "src/**"}, wantErr: "twice"},
		{args: []string{"--verify", "make test", "--changes", "src/**", "--changes", "docs/**", "--expect-junit", "junit.xml", "--expect-min-tests", "3"},
			want: &verdict.Spec{Command: []string{"make", "test"}, Changes: []string{"src/**", "docs/**"}, Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 3}}},
		{args: []string{"--verify", "make test", "--expect-junit", "junit.xml"},
			want: &verdict.Spec{Command: []string{"make", "test"}, Expect: &verdict.Expect{JUnit: "junit.xml"}}},
		{args: []string{"--verify", "true", "--verify-timeout", "0s"}, wantErr: "more than 0s"},
		{args: []string{"--verify", "true", "--protect", "/etc/**"}, wantErr: "relative"},
	} {
		got, err := parseRun(append([]string{"--subagent", "s"}, tt.args...)...)
		if tt.wantErr != "" {
			if _, usage := err.(*cmdutil.UsageError); !usage || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: Execute = %v, want a usage error containing %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got.req.Verify); diff != "" {
			t.Errorf("%q: gate (-want +got):\n%s", tt.args, diff)
		}
	}
}

// TestPrintRecord_Verdict: describe and the run summary show the gate, the verdict and the
// tail, escaped (orch status's VERIFY column: cli/orch's TestTaskVerdict).
func TestPrintRecord_Verdict(t *testing.T) {
	spec := &verdict.Spec{Command: []string{"go", "test", "./..."}, Timeout: verdict.DefaultTimeout, Protect: []string{"**/*_test.go"}}
	v := verdict.Red(verdict.ReasonExit, "exit status 1", 1, spec.Command, 1500*time.Millisecond,
		verdict.TailText{Text: "--- FAIL: TestAdd\x1b[31m\nFAIL\n", Total: 28})
	r := &dispatch.Record{ID: "d", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonVerifyFailed, Verify: spec, Verdict: &v}
	var b bytes.Buffer
	printRecord(&b, r)
	for _, want := range []string{
		"verify:    go test ./... (timeout 10m0s; protect **/*_test.go)\n",
		"           verdict failed: exit-status (exit 1, 1.5s)\n",
		"           | --- FAIL: TestAdd\\x1b[31m\n",
		"           | FAIL\n",
		"sha256 " + v.OutputSHA256,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe output lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Error("describe printed the tail's escape sequence raw")
	}
}
