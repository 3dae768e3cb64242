package secret

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Finding is one credential found by [Scan]. It locates the credential without containing it.
type Finding struct {
	Pattern string // pattern name, one of [Patterns]
	Line    int    // 1-based line of the first byte of the match (one more than the '\n' bytes before it)
	Preview string // the first 4 bytes of the match followed by "...", never more
}

// UnknownPatternError reports pattern names that [Patterns] does not list.
type UnknownPatternError struct {
	Unknown []string
}

func (e *UnknownPatternError) Error() string {
	quoted := make([]string, len(e.Unknown))
	for i, n := range e.Unknown {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("credential pattern %s unknown; known patterns: %s",
		strings.Join(quoted, ", "), strings.Join(Patterns(), ", "))
}

const previewLen = 4

// pattern finds one kind of credential. Instead of running a regexp over the whole input, Scan
// finds where a trigger literal occurs and runs the \A-anchored regexp only there, on at most
// window bytes. Only the start of a match is reported, so a "20 or more" run is written {20}: it
// matches exactly when {20,} does, and a bounded pattern on a short window lets RE2 use its
// backtracker (bounded, linear) instead of the slower NFA. scan_fuzz_test.go checks Scan against
// the plain unbounded regexps at every position.
type pattern struct {
	name      string
	triggers  [][]byte       // every match starts with one of these
	wordStart bool           // the byte before a match must not be [A-Za-z0-9_]
	exclude   []string       // a match must not start with any of these (RE2 has no lookahead)
	window    int            // bytes from the trigger the regexp may need (0: to the end)
	runThen   string         // if set, see below
	re        *regexp.Regexp // anchored with \A, matched from the trigger's position
	// binaryRe, when set, replaces re in binary data (see [IsBinary]), on binaryWindow bytes.
	binaryRe     *regexp.Regexp
	binaryWindow int
}

// A pattern with runThen set (jwt) has no length bound, so it is matched to the end of the token.
// Its first segment is the maximal [A-Za-z0-9_-] run starting at the trigger, and that run MUST be
// followed by runThen: checking that without the regexp rejects the common near miss cheaply. A
// later trigger inside the same run ends at the same place, so it can match only if the earlier
// one did, and then on the same line: Scan skips it, so a run packed with triggers ("eyJ-eyJ-…")
// is walked once rather than once per trigger.

// patterns is sorted by name. A trailing `(?:[^…]|\z)` stands in for a word boundary where the
// credential's alphabet includes '-', which \b does not treat as a word character. Each window is
// the longest match, plus one byte where a trailing check must see the byte after the match. The
// table and its regexps are made on first use, not at init: most agora processes never scan.
var patterns = sync.OnceValue(newPatterns)

func newPatterns() []pattern {
	return []pattern{
		{name: "anthropic-key", triggers: lits("sk-ant-"), wordStart: true, window: 27,
			re: anchored(`sk-ant-[A-Za-z0-9_-]{20}`)},
		{name: "aws-access-key", triggers: lits("AKIA", "ASIA"), wordStart: true, window: 21,
			re: anchored(`(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
		{name: "bearer-token", triggers: lits("Bearer", "bearer", "BEARER"), wordStart: true, window: 6 + 64 + 20,
			re: anchored(`(?:Bearer|bearer|BEARER)[ \t]{1,64}[A-Za-z0-9._~+/=-]{20}`)},
		{name: "github-token", triggers: lits("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), wordStart: true, window: 41,
			re: anchored(`gh[pousr]_[A-Za-z0-9]{36}\b|github_pat_[A-Za-z0-9_]{22}`)},
		{name: "google-api-key", triggers: lits("AIza"), wordStart: true, window: 40,
			re: anchored(`AIza[0-9A-Za-z_-]{35}(?:[^0-9A-Za-z_-]|\z)`)},
		{name: "jwt", triggers: lits("eyJ"), wordStart: true, runThen: ".eyJ",
			re: anchored(`eyJ[A-Za-z0-9_-]{7,}\.eyJ[A-Za-z0-9_-]{7,}\.[A-Za-z0-9_-]{10}`)},
		{name: "openai-key", triggers: lits("sk-"), wordStart: true, exclude: []string{"sk-ant-"}, window: 28,
			re: anchored(`sk-(?:proj-)?[A-Za-z0-9_-]{20}`)},
		{name: "private-key", triggers: lits("-----BEGIN "), window: 11 + 3*17 + 22,
			re: anchored(`-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----`),
			// In a binary the marker alone is code (PEM parsers carry it: the claude CLI does), so
			// there it must be followed by key material: a line break (or a "\n" escape, a key in
			// a string literal), up to four "Name: value" header lines (an encrypted PEM), and 40
			// base64 characters.
			binaryWindow: 11 + 3*17 + 22 + 2 + 4*(32+2+128+2) + 2 + 40,
			binaryRe: anchored(`-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----` +
				`(?:\r?\n|\\n)(?:[A-Za-z0-9-]{1,32}: [ -~]{1,128}(?:\r?\n|\\n)){0,4}(?:\r?\n|\\n)?[A-Za-z0-9+/=]{40}`)},
		{name: "slack-token", triggers: lits("xox", "hooks.slack.com/services/"), wordStart: true, window: 35,
			re: anchored(`xox[abposr]-[0-9A-Za-z-]{10}|hooks\.slack\.com/services/[A-Za-z0-9_/-]{10}`)},
		{name: "stripe-key", triggers: lits("sk_live_", "sk_test_", "rk_live_", "rk_test_"), wordStart: true, window: 24,
			re: anchored(`[sr]k_(?:live|test)_[0-9A-Za-z]{16}`)},
	}
}

func lits(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, t := range s {
		out[i] = []byte(t)
	}
	return out
}

func anchored(expr string) *regexp.Regexp {
	return regexp.MustCompile(`\A(?:` + expr + `)`)
}

// Patterns returns the sorted names of every credential pattern [Scan] knows.
func Patterns() []string {
	names := make([]string, len(patterns()))
	for i, p := range patterns() {
		names[i] = p.name
	}
	return names
}

// ValidatePatternNames returns an [UnknownPatternError] naming every entry of names that is not a
// known pattern, or nil.
func ValidatePatternNames(names []string) error {
	var unknown []string
	for _, n := range names {
		if !slices.ContainsFunc(patterns(), func(p pattern) bool { return p.name == n }) {
			unknown = append(unknown, n)
		}
	}
	if unknown != nil {
		return &UnknownPatternError{Unknown: unknown}
	}
	return nil
}

// IsBinary reports whether Scan treats data as binary: it holds a NUL byte (git's test).
func IsBinary(data []byte) bool { return bytes.IndexByte(data, 0) >= 0 }

// Scan reports the credentials in data, which may be text or binary: it works on raw bytes and
// needs no valid UTF-8. Every file is scanned with every pattern, binary or not (nothing is
// skipped); in binary data ([IsBinary]) private-key needs key material after the PEM marker,
// because executables that parse PEM contain the bare marker. Patterns named in allow are skipped; names there that are not patterns are
// ignored (check them with [ValidatePatternNames]). Findings are in order of position (patterns at
// the same position by name), at most one per (pattern, line).
func Scan(data []byte, allow []string) []Finding {
	patterns, index := patterns(), triggers()
	skip := make([]bool, len(patterns))
	for i, p := range patterns {
		skip[i] = slices.Contains(allow, p.name)
	}
	binary := IsBinary(data)
	lastLine := make([]int, len(patterns)) // line of each pattern's latest finding
	resume := make([]int, len(patterns))   // no trigger of patterns[j] before resume[j] needs testing
	findings := []Finding{}
	line, counted := 1, 0
	for i := 0; i+1 < len(data); i++ {
		g := index.group[uint16(data[i])|uint16(data[i+1])<<8]
		if g == 0 {
			continue
		}
		for _, t := range index.groups[g] {
			p := &patterns[t.pattern]
			if skip[t.pattern] || i < resume[t.pattern] || !bytes.HasPrefix(data[i:], t.lit) {
				continue
			}
			ok, next := p.matchAt(data, i, binary)
			resume[t.pattern] = next
			if !ok {
				continue
			}
			line += bytes.Count(data[counted:i], []byte{'\n'})
			counted = i
			if lastLine[t.pattern] == line {
				continue
			}
			lastLine[t.pattern] = line
			end := min(i+previewLen, len(data))
			findings = append(findings, Finding{Pattern: p.name, Line: line, Preview: string(data[i:end]) + "..."})
		}
	}
	return findings
}

// trigger is one literal that starts a match of patterns[pattern].
type trigger struct {
	lit     []byte
	pattern int
}

// triggerIndex lets Scan screen every position, in a single pass, by its first two bytes: group
// maps them to an index into groups (0: no trigger starts so), which lists the triggers with that
// prefix. Both are built once from patterns, on first use, and never change.
type triggerIndex struct {
	group  *[1 << 16]uint8
	groups [][]trigger
}

var triggers = sync.OnceValue(indexTriggers)

func indexTriggers() triggerIndex {
	group := new([1 << 16]uint8)
	groups := [][]trigger{nil}
	for i, p := range patterns() { // patterns is sorted by name, so each group is too
		for _, lit := range p.triggers {
			k := uint16(lit[0]) | uint16(lit[1])<<8
			if group[k] == 0 {
				if len(groups) > 255 {
					panic("secret: more than 255 trigger prefixes")
				}
				group[k] = uint8(len(groups))
				groups = append(groups, nil)
			}
			groups[group[k]] = append(groups[group[k]], trigger{lit: lit, pattern: i})
		}
	}
	return triggerIndex{group: group, groups: groups}
}

// matchAt reports whether a match of p starts at pos, and the first position after pos at which
// a trigger of p needs testing again.
func (p *pattern) matchAt(data []byte, pos int, binary bool) (bool, int) {
	if p.wordStart && pos > 0 && isWordByte(data[pos-1]) {
		return false, pos + 1
	}
	re, window := p.re, p.window
	if binary && p.binaryRe != nil {
		re, window = p.binaryRe, p.binaryWindow
	}
	rest := data[pos:]
	if window > 0 && len(rest) > window {
		rest = rest[:window]
	}
	for _, x := range p.exclude {
		if bytes.HasPrefix(rest, []byte(x)) {
			return false, pos + 1
		}
	}
	next := pos + 1
	if p.runThen != "" {
		n := 0
		for n < len(rest) && (rest[n] == '-' || isWordByte(rest[n])) {
			n++
		}
		next = pos + n
		if !bytes.HasPrefix(rest[n:], []byte(p.runThen)) {
			return false, next
		}
	}
	return re.Match(rest), next
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
