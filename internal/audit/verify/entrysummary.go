package verify

import (
	"bytes"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// entrySummary is what checking a bundle that is not part of a run reads of an entry: its seq,
// kind and subject (checked against the index and the selection, and shown on its row), and
// details.manifest when that is a string (the manifests' check). The rest is checked, not kept.
type entrySummary struct {
	seq         uint64
	kind        string
	subject     string
	manifest    string
	hasManifest bool
}

// summaryOf is the summary of a fully decoded entry.
func summaryOf(f EntryFields) entrySummary {
	m, ok := f.Details[entry.KeyManifest].(string)
	return entrySummary{seq: f.Seq, kind: f.Kind, subject: f.Subject, manifest: m, hasManifest: ok}
}

// decodeSummary takes exactly the entries [decodeCanonical] takes (the same grammar, depth
// limit and field checks), with the same seq, kind, subject and details.manifest, but builds
// no map and no value it does not return: decoding each entry into maps was the largest part
// of checking a 100,000-entry bundle after its parse. For anything else it
// returns ok false and the caller decodes the entry in full, which gives the error
// (FuzzDecodeSummary_MatchesCanonical holds the two to that).
func decodeSummary(b []byte) (s entrySummary, ok bool) {
	if len(b) > MaxEntrySize {
		return s, false
	}
	p := &canonWalker{b: b}
	if len(b) == 0 || b[0] != '{' {
		return s, false
	}
	p.i++
	var prev []byte
	var keys int
	for first := true; ; first = false {
		if p.i < len(b) && b[p.i] == '}' {
			p.i++
			break
		}
		if !first {
			if p.i >= len(b) || b[p.i] != ',' {
				return s, false
			}
			p.i++
		}
		key, ok := p.str()
		if !ok || (!first && bytes.Compare(prev, key) >= 0) || p.i >= len(b) || b[p.i] != ':' {
			return s, false
		}
		prev = key
		p.i++
		if !p.summaryField(string(key), &s) {
			return s, false
		}
		keys++
	}
	// Keys strictly increase, each is one of the six: six keys are all six.
	return s, keys == len(entryKeys) && p.i == len(b)
}

// summaryField reads the top-level value of key into s; it returns false for a key that is not
// an entry's, a value of the wrong type, or a value decodeCanonical would not take.
func (p *canonWalker) summaryField(key string, s *entrySummary) bool {
	if p.i >= len(p.b) {
		return false
	}
	c := p.b[p.i]
	switch key {
	case "seq":
		if c != '-' && (c < '0' || c > '9') {
			return false
		}
		v, ok := p.integer()
		s.seq = uint64(v)
		return ok && v >= 0
	case "time":
		t, ok := p.str()
		if !ok {
			return false
		}
		_, err := time.Parse(time.RFC3339Nano, string(t))
		return err == nil
	case "actor", "kind", "subject":
		v, ok := p.str()
		if key == "kind" {
			s.kind = string(v)
		} else if key == "subject" {
			s.subject = string(v)
		}
		return ok
	case "details":
		return c == '{' && p.skipObject(1, s)
	}
	return false
}

// skip checks one value as [canonWalker.value] reads it, building nothing.
func (p *canonWalker) skip(depth int) bool {
	if p.i >= len(p.b) || depth > maxFastDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.skipObject(depth, nil)
	case c == '[':
		p.i++
		for first := true; ; first = false {
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return true
			}
			if !first {
				if p.i >= len(p.b) || p.b[p.i] != ',' {
					return false
				}
				p.i++
			}
			if !p.skip(depth + 1) {
				return false
			}
		}
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		_, ok := p.integer()
		return ok
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.b[p.i:], []byte(lit)) {
			p.i += len(lit)
			return true
		}
	}
	return false
}

// skipObject checks an object as [canonWalker.object] reads it. With s (details), a key
// "manifest" whose value is a string is kept in s.
func (p *canonWalker) skipObject(depth int, s *entrySummary) bool {
	p.i++ // '{'
	var prev []byte
	for first := true; ; first = false {
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return true
		}
		if !first {
			if p.i >= len(p.b) || p.b[p.i] != ',' {
				return false
			}
			p.i++
		}
		key, ok := p.str()
		if !ok || (!first && bytes.Compare(prev, key) >= 0) || p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		prev = key
		p.i++
		if s != nil && string(key) == entry.KeyManifest && p.i < len(p.b) && p.b[p.i] == '"' && depth+1 <= maxFastDepth {
			v, ok := p.str()
			if !ok {
				return false
			}
			s.manifest, s.hasManifest = string(v), true
			continue
		}
		if !p.skip(depth + 1) {
			return false
		}
	}
}
