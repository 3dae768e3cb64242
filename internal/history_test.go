package internal_test

import (
	"bufio"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository as the tests of this package (run in internal/) see it.
const repoRoot = ".."

// benchmarksHistory is the lab notebook of dated runs: it is history by design, so it is the
// one document the history check does not read.
const benchmarksHistory = "docs/benchmarks-history.md"

// historyPatterns are the phrases by which a comment or a document tells its own history
// (the numbered piece of work, CI run or person that found or measured something) instead
// of what is and why. That belongs in a commit message. Each is narrow enough that present-tense
// text does not match: "session" and "round" are words of the domain (a gateway session, a
// second round of decoding), so only a numbered or past one is history.
//
// needs holds words of which a match contains at least one, in lower case: a line of ASCII
// text with none of them is not given to the expression (the check reads every line of the
// repository, and case-folding expressions are slow to fail, most under -race).
var historyPatterns = []struct {
	name  string
	needs []string
	re    *regexp.Regexp
}{
	{"a numbered round or session of work", []string{"round", "session"}, regexp.MustCompile(`(?i)\b(rounds?|sessions?) #?\d{1,2}(?:$|[^\w.,]|[.,](?:\D|$))`)},
	{"a past round or session of work", []string{"round", "session"}, regexp.MustCompile(`(?i)\b(this|last|previous|earlier|latest) round\b|\b(last|earlier) session\b`)},
	{"a numbered CI run", []string{"ci"}, regexp.MustCompile(`(?i)\bci-?\d+\b|\bci run \d+|\bci run (saw|found|showed|failed|caught|hit)\b`)},
	{"a numbered run of a report", []string{"run "}, regexp.MustCompile(`(?i)\brun \d+ of\b`)},
	{"who attacked it", []string{"red"}, regexp.MustCompile(`(?i)\bred[- ]?teams?\b`)},
	{"who found it", []string{"reviewer", " by "}, regexp.MustCompile(`(?i)\breviewers? (found|noticed|caught|flagged|spotted|saw|pointed out|reported|measured)\b|\b(found|caught|noticed|spotted|reported) by (the |a |an )?(reviewers?|review|ci\b|session|round|helper)`)},
	{"who measured it", []string{"measured by"}, regexp.MustCompile(`(?i)\bwas measured by [A-Z]\w*|\bmeasured by (the )?(helper|session|round|ci\b)`)},
	{"a numbered helper", []string{"helper-"}, regexp.MustCompile(`(?i)\bhelper-\d+\b`)},
}

// issueNumber and issueWord find an issue number of this repository: a "#" or the word
// "issue" before digits. issueNumbers drops the "#" forms that are something else: an HTML
// character reference (&#60;), another repository's issue (golang/go#123) and a Markdown
// anchor (#1-overview).
var (
	issueNumber = regexp.MustCompile(`#\d+\b`)
	issueWord   = regexp.MustCompile(`(?i)\bissues? #?\d+\b`)
)

// issueNumbers returns where text cites an issue number, as byte offsets; the word and the
// number it names are one citation.
func issueNumbers(text string) [][]int {
	if isASCII(text) && !strings.Contains(text, "#") && !strings.Contains(strings.ToLower(text), "issue") {
		return nil
	}
	words := issueWord.FindAllStringIndex(text, -1)
	var out [][]int
	for _, loc := range issueNumber.FindAllStringIndex(text, -1) {
		if slices.ContainsFunc(words, func(w []int) bool { return w[0] <= loc[0] && loc[1] <= w[1] }) {
			continue
		}
		before, after := byte(' '), byte(' ')
		if loc[0] > 0 {
			before = text[loc[0]-1]
		}
		if loc[1] < len(text) {
			after = text[loc[1]]
		}
		if before == '&' || before == '#' || isWordByte(before) || after == '-' {
			continue
		}
		out = append(out, loc)
	}
	return append(out, words...)
}

// isASCII reports whether text has no byte above 0x7f.
func isASCII(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return false
		}
	}
	return true
}

// isWordByte reports whether b is an ASCII letter, digit or underscore.
func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// historyAllowed lists the places where an issue number stays because a reader must follow
// it there: path (from the repository root), the exact text the check matches and why. An
// entry that no longer matches anything fails the test, so the list only shrinks.
var historyAllowed = []struct{ path, match, why string }{
	{"docs/BENCHMARKS.md", "issue #47", "the run page's baseline row quotes the figure issue 47 gives (233 ms quiet); the scale table's rows are kept as their owner wrote them"},
	{"docs/adr/0005-handoff-proves-the-caller-holds-the-takers-privileges.md", "#28", "an accepted ADR is not edited (docs/adr/README.md); its context names the issue where the hand-off was designed"},
	{"docs/adr/0005-handoff-proves-the-caller-holds-the-takers-privileges.md", "issue #46", "an accepted ADR is not edited; the two designs it weighs are argued in issue 46"},
	{"docs/adr/0006-one-audit-key-names-both-logs.md", "issue #46", "an accepted ADR is not edited; issue 46 states the difference it decides"},
	{"docs/adr/0007-no-pod-ahead-of-the-replica.md", "issue #46", "an accepted ADR is not edited; the failure it answers is run 5 of issue 46's report"},
	{"docs/adr/0007-no-pod-ahead-of-the-replica.md", "run 5 of", "an accepted ADR is not edited; it names the run of issue 46's report where the task failed"},
}

// historyPending lists files other branches are rewriting now: a path prefix ending in "/"
// or a path.Match pattern, and why. Their comments are brought to the present tense when
// those branches land; a pattern that matches no finding then fails the test.
var historyPending = []struct{ pattern, why string }{}

// pendingMatch reports whether a historyPending pattern covers the file at rel.
func pendingMatch(pattern, rel string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(rel, pattern)
	}
	ok, err := path.Match(pattern, rel)
	return err == nil && ok
}

// spanReach bounds, in bytes, the words either side of a line break that spanningFindings
// reads.
const spanReach = 48

// historyHit is one line that tells its history.
type historyHit struct {
	path string // from the repository root, slash-separated
	line int
	what string // the pattern's name
	text string // the matched text
}

// historyFinding is one match of a history pattern in a text.
type historyFinding struct {
	what, match string
	start, end  int // the match's byte offsets in the text
}

// historyFindings returns what historyPatterns and issueNumbers find in one line of text.
func historyFindings(text string) []historyFinding {
	var out []historyFinding
	ascii := isASCII(text)
	lower := strings.ToLower(text)
	for _, p := range historyPatterns {
		if ascii && !slices.ContainsFunc(p.needs, func(w string) bool { return strings.Contains(lower, w) }) {
			continue // (?i) folds only ASCII letters onto ASCII letters: no match is possible
		}
		for _, loc := range p.re.FindAllStringIndex(text, -1) {
			m := strings.TrimRight(text[loc[0]:loc[1]], " .,;:)'\"")
			out = append(out, historyFinding{p.name, m, loc[0], loc[1]})
		}
	}
	for _, loc := range issueNumbers(text) {
		out = append(out, historyFinding{"an issue number", text[loc[0]:loc[1]], loc[0], loc[1]})
	}
	return out
}

// spanningFindings returns the findings that a line break hides: those of "line next" that
// start in line and end in next ("red" ending one line, "team 33" opening the next). Only
// the last words of line and the first of next are read: no pattern is longer than
// spanReach.
func spanningFindings(line, next string) []historyFinding {
	line = strings.TrimRight(line, " ")
	next = strings.TrimLeft(strings.TrimPrefix(strings.TrimSpace(next), "//"), " ")
	if len(line) > spanReach {
		if i := strings.IndexByte(line[len(line)-spanReach:], ' '); i >= 0 {
			line = line[len(line)-spanReach+i+1:]
		}
	}
	if len(next) > spanReach {
		if i := strings.LastIndexByte(next[:spanReach], ' '); i >= 0 {
			next = next[:i]
		}
	}
	var out []historyFinding
	for _, f := range historyFindings(line + " " + next) {
		if f.start < len(line) && f.end > len(line)+1 {
			out = append(out, f)
		}
	}
	return out
}

// goCommentLines returns each line of each comment in a Go source file, with its line number.
// go/scanner finds the comments, so a string or an identifier (TestRedTeam28_...) is never read.
func goCommentLines(t *testing.T, name string) []historyLine {
	t.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []historyLine
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		first := fset.Position(pos).Line
		for i, l := range strings.Split(lit, "\n") {
			out = append(out, historyLine{first + i, l})
		}
	}
	return out
}

type historyLine struct {
	n    int
	text string
}

// linkTarget is the target of a Markdown link: "](benchmarks-history.md#audit)".
var linkTarget = regexp.MustCompile(`\]\([^()\s]*\)`)

// blankLinkTargets replaces each link target in a Markdown line with spaces: an anchor is
// the slug of a heading it points at, not prose, so the history file's headings may be
// linked by their anchors.
func blankLinkTargets(line string) string {
	return linkTarget.ReplaceAllStringFunc(line, func(t string) string {
		return "](" + strings.Repeat(" ", len(t)-3) + ")"
	})
}

// markdownLines returns every line of a Markdown file, link targets blanked.
func markdownLines(t *testing.T, name string) []historyLine {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []historyLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		out = append(out, historyLine{n, blankLinkTargets(sc.Text())})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// historySources lists, from the repository root, every Go file outside testdata and the
// Markdown a reader meets first: README.md and docs/**/*.md but the benchmark notebook.
func historySources(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, repoRoot+string(filepath.Separator)))
		if d.IsDir() {
			if p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go"):
			out = append(out, rel)
		case rel == "README.md", strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md") && rel != benchmarksHistory:
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// historyScan returns every line of the repository's Go comments and documents that tells
// its history.
func historyScan(t *testing.T) []historyHit {
	t.Helper()
	var hits []historyHit
	for _, rel := range historySources(t) {
		p := filepath.Join(repoRoot, filepath.FromSlash(rel))
		lines := markdownLines
		if strings.HasSuffix(rel, ".go") {
			lines = goCommentLines
		}
		ls := lines(t, p)
		for i, l := range ls {
			found := historyFindings(l.text)
			if i+1 < len(ls) && ls[i+1].n == l.n+1 {
				found = append(found, spanningFindings(l.text, ls[i+1].text)...)
			}
			for _, f := range found {
				hits = append(hits, historyHit{rel, l.n, f.what, f.match})
			}
		}
	}
	return hits
}

// allowedBy returns the index of the historyAllowed entry that covers h, or -1.
func allowedBy(h historyHit) int {
	return slices.IndexFunc(historyAllowed, func(a struct{ path, match, why string }) bool {
		return a.path == h.path && strings.EqualFold(a.match, h.text)
	})
}

// TestNoHistoryInCommentsOrDocs keeps code comments and documents in the present tense:
// they say what is and why; which piece of work, CI run or person found it, and which
// issue asked for it, is the commit message's to say.
func TestNoHistoryInCommentsOrDocs(t *testing.T) {
	used := make([]bool, len(historyAllowed))
	pendingUsed := make([]bool, len(historyPending))
	for _, h := range historyScan(t) {
		if i := allowedBy(h); i >= 0 {
			used[i] = true
			continue
		}
		if i := slices.IndexFunc(historyPending, func(p struct{ pattern, why string }) bool { return pendingMatch(p.pattern, h.path) }); i >= 0 {
			pendingUsed[i] = true
			continue
		}
		t.Errorf("%s:%d: %s (%q): say what is and why; history goes in the commit message", h.path, h.line, h.what, h.text)
	}
	for i, a := range historyAllowed {
		if a.why == "" {
			t.Errorf("historyAllowed %s %q has no reason", a.path, a.match)
		}
		if !used[i] {
			t.Errorf("historyAllowed %s %q matches nothing now: remove it", a.path, a.match)
		}
	}
	for i, p := range historyPending {
		if !pendingUsed[i] {
			t.Errorf("historyPending %s finds no history now: remove it", p.pattern)
		}
	}
}

// TestHistoryFindings proves the patterns catch history and leave present-tense text alone.
func TestHistoryFindings(t *testing.T) {
	bad := []string{
		"// the cap came from round 3",
		"// measured in session 5: 12 ms",
		"// measured in sesſion 5: 12 ms", // (?i) folds ſ onto s: a line that is not ASCII meets every expression
		"// THE RED TEAM'S ATTACK",
		"see iſſue 12",
		"// a flake in ci21 under load",
		"(failed run 2 of the report)",
		"// this round moves the pool",
		"as of the last session",
		"// the red team found that a symlink escapes",
		"// (red team 33)",
		"// a reviewer noticed the lock is taken twice",
		"// found by the reviewer",
		"the figure was measured by Alice",
		"// Red team 48 (helper-35)",
		"// the orchestrator's budget (#28)",
		"see issue 31 for the design",
		"- Replication (#31, `internal/replicate`)",
	}
	for _, text := range bad {
		if len(historyFindings(text)) == 0 {
			t.Errorf("historyFindings(%q) found nothing, want a finding", text)
		}
	}
	if got := blankLinkTargets("see [the fixes](benchmarks-history.md#after-the-red-teams-fixes-14) (#14)"); len(historyFindings(got)) != 1 {
		t.Errorf("blankLinkTargets kept the anchor or dropped the prose: %q", got)
	}
	if f := spanningFindings("// the stage is removed under it (red", "// team 43). Not recorded"); len(f) != 1 {
		t.Errorf("spanningFindings of a red team cut by a line break = %v, want one finding", f)
	}
	if f := spanningFindings("// the fence (#31)", "// holds"); len(f) != 0 {
		t.Errorf("spanningFindings of a finding within one line = %v, want none (the line reports it)", f)
	}
	good := []string{
		"// the gateway revokes a previous session of the dispatch",
		"// an escaped path that encodes '/' (a second round of decoding) is refused",
		"// the keys are found by discovery at the issuer's well-known URL",
		"// one credential found by [Scan]",
		"// the next round's Listen replaces it",
		"// a character reference such as &#60; is decoded once",
		"see [the table](#1-targets) and golang/go#12345",
		"// TestRedTeam28S3_CopyChangedWhilePinnedIsNeverTrusted checks the pin",
		"a cold CI run takes 882 s",
		"// a round-trip through JSON keeps the order",
		"the median of rounds 1.93 ms",
		"(no token or no session 401, another dispatch's token 403)",
		"rapid's 100 cost 108 s in CI",
	}
	for _, text := range good {
		if f := historyFindings(text); len(f) != 0 {
			t.Errorf("historyFindings(%q) = %v, want nothing", text, f)
		}
	}
}
