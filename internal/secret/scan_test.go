package secret

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Fixtures are assembled from pieces so this file never holds a literal that other credential
// scanners (push protection, pre-commit hooks) would flag.
func cat(parts ...string) string { return strings.Join(parts, "") }

var (
	fxAWS       = cat("AKIA", "IOSFODNN7EXAMPLE")
	fxAWSTemp   = cat("ASIA", "Y34FZKBOKMUTVV7A")
	fxGitHub    = cat("gh", "p_", strings.Repeat("aB3dE6gH9j", 3), "kLmN0p")
	fxGitHubPAT = cat("github", "_pat_", "11ABCDEFG0123456789_abcdefghijklmnopqrstuv")
	fxRSA       = cat("-----BEGIN ", "RSA PRIVATE KEY", "-----")
	fxJWT       = cat("eyJ", "hbGciOiJIUzI1NiJ9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
	fxOpenAI    = cat("sk", "-", "abcdefghij0123456789ABCDEFGHIJ")
	fxOpenAIPrj = cat("sk", "-proj-", "Abc_def-0123456789xyzXYZ")
	fxAnthropic = cat("sk", "-ant-", "api03-abcdefghij0123456789")
	fxGoogle    = cat("AI", "za", "SyD-abcdefghijklmnopqrstuvwxyz01234")
	fxSlack     = cat("xo", "xb-", "1234567890-abcdefABCDEF")
	fxSlackHook = cat("https://hooks", ".slack.com/services/", "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX")
	fxStripe    = cat("sk", "_live_", "4eC39HqLyjWDarjtT1zdp7dc")
	fxStripeRK  = cat("rk", "_test_", "4eC39HqLyjWDarjtT1zdp7dc")
	fxBearer    = cat("Authorization: ", "Bearer ", "abcdefghijklmnopqrstuvwxyz.0123456789")
)

func TestScan_Patterns(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string // pattern name, or "" for no finding
	}{
		{"aws positive", "key=" + fxAWS + "\n", "aws-access-key"},
		{"aws temporary", "AWS_ACCESS_KEY_ID=" + fxAWSTemp, "aws-access-key"},
		{"aws 15 chars", "key=" + fxAWS[:19], ""},
		{"aws 17 chars", "key=" + fxAWS + "X", ""},
		{"aws lowercase body", "key=" + cat("AKIA", "iosfodnn7example"), ""},
		{"aws inside identifier", "xAKIA" + fxAWS[4:], ""},

		{"github classic", "token: " + fxGitHub, "github-token"},
		{"github oauth", cat("gh", "o_", strings.Repeat("Z9", 18)), "github-token"},
		{"github fine-grained", "GH=" + fxGitHubPAT, "github-token"},
		{"github 35 chars", "token: " + fxGitHub[:39], ""},
		{"github unknown prefix", cat("gh", "x_", strings.Repeat("a", 36)), ""},
		{"github pat short", cat("github", "_pat_", "abc123"), ""},

		{"private key rsa", fxRSA + "\nMIIE...", "private-key"},
		{"private key plain", cat("-----BEGIN ", "PRIVATE KEY", "-----"), "private-key"},
		{"private key openssh", cat("-----BEGIN ", "OPENSSH PRIVATE KEY", "-----"), "private-key"},
		{"private key ec", cat("-----BEGIN ", "EC PRIVATE KEY", "-----"), "private-key"},
		{"private key dsa", cat("-----BEGIN ", "DSA PRIVATE KEY", "-----"), "private-key"},
		{"private key encrypted", cat("-----BEGIN ", "ENCRYPTED PRIVATE KEY", "-----"), "private-key"},
		{"private key pgp", cat("-----BEGIN ", "PGP PRIVATE KEY BLOCK", "-----"), "private-key"},
		{"public key", cat("-----BEGIN ", "PUBLIC KEY", "-----"), ""},
		{"certificate", cat("-----BEGIN ", "CERTIFICATE", "-----"), ""},
		{"pgp public key", cat("-----BEGIN ", "PGP PUBLIC KEY BLOCK", "-----"), ""},

		{"jwt", "cookie=" + fxJWT, "jwt"},
		{"jwt two parts", "x " + fxJWT[:strings.LastIndexByte(fxJWT, '.')], ""},
		{"jwt short signature", "x " + fxJWT[:strings.LastIndexByte(fxJWT, '.')+9], ""},
		{"jwt short header", cat("eyJ", "hbG", ".", "eyJ", "zdWIiOiIxMjM0", ".", "abcdefghijkl"), ""},

		{"openai legacy", "OPENAI_API_KEY=" + fxOpenAI, "openai-key"},
		{"openai project", "key: " + fxOpenAIPrj, "openai-key"},
		{"openai short", cat("sk", "-", "abc123"), ""},
		{"openai inside word", "task-" + fxOpenAI[3:] + " risk" + fxOpenAI[2:], ""},
		{"openai not anthropic", fxAnthropic, "anthropic-key"},

		{"anthropic", "ANTHROPIC_API_KEY=" + fxAnthropic, "anthropic-key"},
		{"anthropic short", cat("sk", "-ant-", "api03-abc"), ""},

		{"google", "key=" + fxGoogle + "&q=1", "google-api-key"},
		{"google 34 chars", "key=" + fxGoogle[:38], ""},
		{"google 36 chars", "key=" + fxGoogle + "Z", ""},

		{"slack bot", "SLACK=" + fxSlack, "slack-token"},
		{"slack webhook", "url: " + fxSlackHook, "slack-token"},
		{"slack unknown type", cat("xo", "xz-", "1234567890-abcdef"), ""},
		{"slack short", cat("xo", "xb-", "123"), ""},
		{"slack webhook bare", cat("https://hooks", ".slack.com/services/"), ""},

		{"stripe secret", "STRIPE=" + fxStripe, "stripe-key"},
		{"stripe restricted", fxStripeRK, "stripe-key"},
		{"stripe publishable", cat("pk", "_live_", "4eC39HqLyjWDarjtT1zdp7dc"), ""},
		{"stripe short", cat("sk", "_live_", "4eC39Hq"), ""},

		{"bearer", fxBearer, "bearer-token"},
		{"bearer lowercase", "authorization: bearer " + strings.Repeat("x", 24), "bearer-token"},
		{"bearer short token", "Authorization: Bearer abc", ""},
		{"bearer placeholder", "Authorization: Bearer ${TOKEN}", ""},
		{"bearer prose", "the bearer of this letter is trustworthy", ""},
		{"bearer no space", "Bearer:" + strings.Repeat("x", 24), ""},

		{"plain prose", "nothing to see here, just ordinary log output 12345", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range Scan([]byte(tt.input), nil) {
				got = append(got, f.Pattern)
			}
			var want []string
			if tt.want != "" {
				want = []string{tt.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Scan patterns (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPatterns_ExactSet(t *testing.T) {
	want := []string{
		"anthropic-key", "aws-access-key", "bearer-token", "github-token", "google-api-key",
		"jwt", "openai-key", "private-key", "slack-token", "stripe-key",
	}
	if diff := cmp.Diff(want, Patterns()); diff != "" {
		t.Errorf("Patterns (-want +got):\n%s", diff)
	}
}

func TestScan_Binary(t *testing.T) {
	data := []byte("\x00\x00\xff\xfe" + fxAWS + "\x00\x01\x80\xc3\x28" + fxStripe + "\x00")
	want := []Finding{
		{Pattern: "aws-access-key", Line: 1, Preview: "AKIA..."},
		{Pattern: "stripe-key", Line: 1, Preview: "sk_l..."},
	}
	if diff := cmp.Diff(want, Scan(data, nil)); diff != "" {
		t.Errorf("Scan binary (-want +got):\n%s", diff)
	}
}

func TestScan_LinesAndOrder(t *testing.T) {
	input := strings.Join([]string{
		"first line " + fxStripe,                 // 1
		"",                                       // 2
		"x " + fxAWS + " and again " + fxAWSTemp, // 3: two aws keys, one finding
		"\r",                                     // 4
		fxRSA,                                    // 5
		"tail " + fxGitHub + " " + fxAWS,         // 6
	}, "\n")
	want := []Finding{
		{Pattern: "stripe-key", Line: 1, Preview: "sk_l..."},
		{Pattern: "aws-access-key", Line: 3, Preview: "AKIA..."},
		{Pattern: "private-key", Line: 5, Preview: "----..."},
		{Pattern: "github-token", Line: 6, Preview: "ghp_..."},
		{Pattern: "aws-access-key", Line: 6, Preview: "AKIA..."},
	}
	if diff := cmp.Diff(want, Scan([]byte(input), nil)); diff != "" {
		t.Errorf("Scan (-want +got):\n%s", diff)
	}
}

// allFixtures holds one credential per pattern, one per line.
func allFixtures() (string, map[string]bool) {
	lines := []string{fxAWS, fxGitHub, fxRSA, fxJWT, fxOpenAI, fxAnthropic, fxGoogle, fxSlack, fxStripe, fxBearer}
	names := map[string]bool{}
	for _, p := range Patterns() {
		names[p] = true
	}
	return strings.Join(lines, "\n"), names
}

func TestScan_AllowSuppressesExactlyOne(t *testing.T) {
	input, names := allFixtures()
	all := Scan([]byte(input), nil)
	var got []string
	for _, f := range all {
		got = append(got, f.Pattern)
	}
	slices.Sort(got)
	if diff := cmp.Diff(Patterns(), got); diff != "" {
		t.Fatalf("fixture set does not trip every pattern exactly once (-want +got):\n%s", diff)
	}
	for name := range names {
		t.Run(name, func(t *testing.T) {
			var want []Finding
			for _, f := range all {
				if f.Pattern != name {
					want = append(want, f)
				}
			}
			if diff := cmp.Diff(want, Scan([]byte(input), []string{name, "not-a-pattern"})); diff != "" {
				t.Errorf("Scan with allow=[%s] (-want +got):\n%s", name, diff)
			}
		})
	}
	if got := Scan([]byte(input), Patterns()); len(got) != 0 {
		t.Errorf("Scan allowing every pattern: got %v, want none", got)
	}
}

func TestScan_PreviewNeverLeaks(t *testing.T) {
	input, _ := allFixtures()
	for _, f := range Scan([]byte(input), nil) {
		if len(f.Preview) != 7 || !strings.HasSuffix(f.Preview, "...") {
			t.Errorf("%s preview %q: want 4 bytes then \"...\"", f.Pattern, f.Preview)
		}
		if !strings.Contains(input, strings.TrimSuffix(f.Preview, "...")) {
			t.Errorf("%s preview %q is not the start of the match", f.Pattern, f.Preview)
		}
	}
}

func TestScan_EmptyInputs(t *testing.T) {
	for _, in := range [][]byte{nil, {}, []byte("\n\n\n")} {
		if got := Scan(in, nil); got == nil || len(got) != 0 {
			t.Errorf("Scan(%q): got %#v, want an empty non-nil list", in, got)
		}
	}
}

func TestValidatePatternNames(t *testing.T) {
	if err := ValidatePatternNames(nil); err != nil {
		t.Errorf("ValidatePatternNames(nil): %v", err)
	}
	if err := ValidatePatternNames(Patterns()); err != nil {
		t.Errorf("ValidatePatternNames(all): %v", err)
	}
	err := ValidatePatternNames([]string{"jwt", "aws-key", "JWT"})
	var ue *UnknownPatternError
	if !errors.As(err, &ue) {
		t.Fatalf("ValidatePatternNames: got %v, want *UnknownPatternError", err)
	}
	if diff := cmp.Diff([]string{"aws-key", "JWT"}, ue.Unknown); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}
	for _, w := range append([]string{`"aws-key"`, `"JWT"`}, Patterns()...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %s", err, w)
		}
	}
}

// TestScan_AdversarialInputsStayLinear feeds inputs packed with triggers whose regexps could
// rescan the rest of the input once per trigger. Each must take about as long as ordinary text of
// the same size: a quadratic scan of 1 MiB is thousands of times slower, so the generous bound
// (relative, so that -race and a busy machine slow both sides alike) cannot flake.
func TestScan_AdversarialInputsStayLinear(t *testing.T) {
	// 256 KiB: a scan quadratic in one of these inputs costs thousands of times ordinary
	// text's at this size, far past the 100x below; 1 MiB only cost more CPU under -race.
	size := 256 << 10
	fill := func(unit string) []byte { return []byte(strings.Repeat(unit, size/len(unit))) }
	// Both sides are timed in this process's CPU time, not wall time: on a loaded machine a
	// wall clock counts the time the scan waited for a core, and at load 25 ordinary text
	// timed in a quiet moment and an input in a busy one can be 150x apart.
	start := cpuTime(t)
	Scan(mixedText(size), nil)
	limit := 2*time.Second + 100*(cpuTime(t)-start)

	inputs := map[string][]byte{
		"jwt run of triggers": fill("eyJ-"),
		"jwt run then dot":    append(fill("eyJ-"), ".eyJ"+strings.Repeat("a", 20)+".b"...),
		"jwt segments":        fill("eyJabcdefghij."),
		"bearer and spaces":   fill("Bearer " + strings.Repeat(" ", 70)),
		"openai dashes":       fill("sk-"),
		"begin headers":       fill("-----BEGIN "),
		"slack":               fill("xoxb-"),
		"all triggers":        fill("AKIA ASIA ghp_ github_pat_ eyJ sk- sk-ant- AIza xoxp- hooks.slack.com/services/ sk_live_ Bearer "),
		"nul bytes":           make([]byte, size),
		"high bytes":          fill("\xff\xfe\x80"),
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			start := cpuTime(t)
			Scan(data, nil)
			if d := cpuTime(t) - start; d > limit {
				t.Errorf("Scan of %d bytes took %v of CPU, over %v (100x ordinary text): want linear time", len(data), d, limit)
			}
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
