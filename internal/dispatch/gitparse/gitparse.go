// Package gitparse reads what git's plumbing prints for the host's verify gate and stacked
// bases: diff-index's raw records and a commit object's committer line. It runs on the host,
// parses output of git processes working on an agent's patch (so any bytes may reach it), and
// imports nothing but the standard library and [verdict]'s change type; it lives apart from
// dispatch so its fuzz targets build without dispatch's import graph.
package gitparse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/verdict"
)

// RawDiff reads `diff-index --raw -z --no-renames --no-abbrev`: for each touched path,
// ":OLDMODE NEWMODE OLDSHA NEWSHA STATUS" NUL PATH NUL. A link's Target is its new blob id
// until the caller reads the target.
func RawDiff(raw []byte) ([]verdict.Change, error) {
	out := make([]verdict.Change, 0, bytes.Count(raw, []byte{0})/2)
	for len(raw) > 0 {
		head, rest, ok := bytes.Cut(raw, []byte{0})
		if !ok {
			return nil, fmt.Errorf("git diff-index: a record without its path")
		}
		p, rest, ok := bytes.Cut(rest, []byte{0})
		if !ok || len(p) == 0 {
			return nil, fmt.Errorf("git diff-index: a record without its path")
		}
		raw = rest
		var f [5][]byte
		line, n := bytes.TrimPrefix(head, []byte{':'}), 0
		for ; n < 5 && len(line) > 0; n++ {
			f[n], line, _ = bytes.Cut(line, []byte{' '})
		}
		oldMode, ok1 := octal(f[0])
		newMode, ok2 := octal(f[1])
		if n != 5 || len(line) > 0 || len(head) == 0 || head[0] != ':' || !ok1 || !ok2 {
			return nil, fmt.Errorf("git diff-index: record %q", head)
		}
		c := verdict.Change{Path: string(p), OldMode: oldMode, NewMode: newMode}
		if newMode == verdict.ModeSymlink {
			c.Target = string(f[3])
		}
		out = append(out, c)
	}
	return out, nil
}

// octal reads a git mode: 1 to 7 octal digits.
func octal(b []byte) (uint32, bool) {
	if len(b) == 0 || len(b) > 7 {
		return 0, false
	}
	var n uint32
	for _, c := range b {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n<<3 | uint32(c-'0')
	}
	return n, true
}

// CommitterDate is the "SECONDS +ZONE" of a commit object's committer line.
func CommitterDate(body []byte) (string, error) {
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" {
			break // the headers end
		}
		rest, ok := strings.CutPrefix(line, "committer ")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '>')
		f := strings.Fields(rest[i+1:])
		if i < 0 || len(f) != 2 || f[0] == "" || strings.Trim(f[0], "0123456789") != "" || !validZone(f[1]) {
			return "", fmt.Errorf("its committer line %q is not one git writes", clip(line))
		}
		return f[0] + " " + f[1], nil
	}
	return "", errors.New("it has no committer")
}

// validZone reports whether z is a zone as git writes it: +HHMM or -HHMM.
func validZone(z string) bool {
	return len(z) == 5 && (z[0] == '+' || z[0] == '-') && strings.Trim(z[1:], "0123456789") == ""
}

// clip shortens what an error quotes back to 100 bytes.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
