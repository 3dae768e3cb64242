package secret

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// referenceScan is the naive definition Scan must agree with: at every position, every pattern's
// unbounded regexp as the brief states it, with the word-start and sk-ant- rules spelled out.
func referenceScan(data []byte) []Finding {
	type ref struct {
		name      string
		wordStart bool
		exclude   string
		re        *regexp.Regexp
	}
	refs := []ref{
		{"anthropic-key", true, "", regexp.MustCompile(`\Ask-ant-[A-Za-z0-9_-]{20,}`)},
		{"aws-access-key", true, "", regexp.MustCompile(`\A(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
		{"bearer-token", true, "", regexp.MustCompile(`\A(?:Bearer|bearer|BEARER)[ \t]{1,64}[A-Za-z0-9._~+/=-]{20,}`)},
		{"github-token", true, "", regexp.MustCompile(`\A(?:gh[pousr]_[A-Za-z0-9]{36}\b|github_pat_[A-Za-z0-9_]{22,})`)},
		{"google-api-key", true, "", regexp.MustCompile(`\AAIza[0-9A-Za-z_-]{35}(?:[^0-9A-Za-z_-]|\z)`)},
		{"jwt", true, "", regexp.MustCompile(`\AeyJ[A-Za-z0-9_-]{7,}\.eyJ[A-Za-z0-9_-]{7,}\.[A-Za-z0-9_-]{10,}`)},
		{"openai-key", true, "sk-ant-", regexp.MustCompile(`\Ask-(?:proj-)?[A-Za-z0-9_-]{20,}`)},
		{"private-key", false, "", regexp.MustCompile(`\A-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----`)},
		// Binary data: the marker must be followed by key material.
		{"private-key-binary", false, "", regexp.MustCompile(`\A-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----` +
			`(?:\r?\n|\\n)(?:[A-Za-z0-9-]{1,32}: [ -~]{1,128}(?:\r?\n|\\n)){0,4}(?:\r?\n|\\n)?[A-Za-z0-9+/=]{40,}`)},
		{"slack-token", true, "", regexp.MustCompile(`\A(?:xox[abposr]-[0-9A-Za-z-]{10,}|hooks\.slack\.com/services/[A-Za-z0-9_/-]{10,})`)},
		{"stripe-key", true, "", regexp.MustCompile(`\A[sr]k_(?:live|test)_[0-9A-Za-z]{16,}`)},
	}
	binary := strings.IndexByte(string(data), 0) >= 0
	findings := []Finding{}
	seen := map[Finding]bool{}
	line := 1
	for i := range data {
		if i > 0 && data[i-1] == '\n' {
			line++
		}
		for _, r := range refs {
			name := r.name
			switch {
			case name == "private-key" && binary, name == "private-key-binary" && !binary:
				continue
			case name == "private-key-binary":
				name = "private-key"
			}
			if r.wordStart && i > 0 && isWordByte(data[i-1]) {
				continue
			}
			if r.exclude != "" && strings.HasPrefix(string(data[i:]), r.exclude) {
				continue
			}
			if !r.re.Match(data[i:]) {
				continue
			}
			key := Finding{Pattern: name, Line: line}
			if seen[key] {
				continue
			}
			seen[key] = true
			findings = append(findings, Finding{Pattern: name, Line: line, Preview: string(data[i:i+4]) + "..."})
		}
	}
	return findings
}

func FuzzScan(f *testing.F) {
	input, _ := allFixtures()
	f.Add([]byte(input))
	f.Add([]byte("\x00\xff" + fxAWS + "\x00"))
	f.Add([]byte("Bearer \t\n" + fxJWT))
	f.Add([]byte("sk-ant-sk-sk_live_eyJeyJ.eyJ"))
	f.Add([]byte(fxJWT + "." + fxJWT))
	names := Patterns()
	f.Fuzz(func(t *testing.T, data []byte) {
		findings := Scan(data, nil)
		for _, fd := range findings {
			if len(fd.Preview) > 7 {
				t.Errorf("preview %q longer than 7 bytes", fd.Preview)
			}
			if !slices.Contains(names, fd.Pattern) {
				t.Errorf("unknown pattern %q", fd.Pattern)
			}
		}
		if len(data) <= 4096 {
			if diff := cmp.Diff(referenceScan(data), findings); diff != "" {
				t.Errorf("Scan disagrees with the reference (-want +got):\n%s", diff)
			}
		}
	})
}

func TestScan_MatchesReference(t *testing.T) {
	input, _ := allFixtures()
	data := []byte(input + "\n" + string(mixedText(64<<10)))
	if diff := cmp.Diff(referenceScan(data), Scan(data, nil)); diff != "" {
		t.Errorf("Scan disagrees with the reference (-want +got):\n%s", diff)
	}
}
