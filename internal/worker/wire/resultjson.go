package wire

import (
	"strconv"
	"unicode/utf8"
)

// appendResult appends r's JSON, byte for byte what encoding/json writes for it, to b. It is
// for a result without needs_input (whose partial_state encoding/json compacts): the
// worker writes one result per process, and encoding/json's first Marshal of a type builds
// its encoders by reflection, 0.1-0.3 ms of every dispatch's end in the sandbox.
// FuzzAppendResult holds it to encoding/json.
func appendResult(b []byte, r *Result) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(r.Status))
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, string(r.Reason))
	b = append(b, `,"detail":`...)
	b = appendJSONString(b, r.Detail)
	b = append(b, `,"exit_code":`...)
	b = strconv.AppendInt(b, int64(r.ExitCode), 10)
	b = append(b, `,"phases":`...)
	b = appendList(b, r.Phases, func(b []byte, p Phase) []byte {
		b = append(b, `{"name":`...)
		b = appendJSONString(b, p.Name)
		b = append(b, `,"ok":`...)
		b = strconv.AppendBool(b, p.OK)
		b = append(b, `,"ms":`...)
		b = strconv.AppendInt(b, p.MS, 10)
		return append(b, '}')
	})
	if p := r.Patch; p != nil {
		b = append(b, `,"patch":{"path":`...)
		b = appendJSONString(b, p.Path)
		b = append(b, `,"sha256":`...)
		b = appendJSONString(b, p.SHA256)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, p.Bytes, 10)
		b = append(b, `,"files_changed":`...)
		b = strconv.AppendInt(b, int64(p.FilesChanged), 10)
		b = append(b, '}')
	}
	b = append(b, `,"outputs":`...)
	b = appendList(b, r.Outputs, func(b []byte, o OutputInfo) []byte {
		return appendFileInfo(b, o.Path, o.Size, o.SHA256)
	})
	b = append(b, `,"outputs_skipped":`...)
	b = appendList(b, r.OutputsSkipped, func(b []byte, s SkippedOutput) []byte {
		b = append(b, `{"path":`...)
		b = appendJSONString(b, s.Path)
		b = append(b, `,"why":`...)
		b = appendJSONString(b, s.Why)
		return append(b, '}')
	})
	if f := r.Transcript; f != nil {
		b = append(b, `,"transcript":`...)
		b = appendFileInfo(b, f.Path, f.Size, f.SHA256)
	}
	if f := r.Final; f != nil {
		b = append(b, `,"final":`...)
		b = appendFileInfo(b, f.Path, f.Size, f.SHA256)
	}
	return append(b, '}')
}

// appendFileInfo appends a FileInfo's or an OutputInfo's JSON (the same fields in the same
// order).
func appendFileInfo(b []byte, path string, size int64, sha string) []byte {
	b = append(b, `{"path":`...)
	b = appendJSONString(b, path)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, `,"sha256":`...)
	b = appendJSONString(b, sha)
	return append(b, '}')
}

// appendList appends s as a JSON array, null when s is nil (as encoding/json writes it).
func appendList[T any](b []byte, s []T, each func([]byte, T) []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, v)
	}
	return append(b, ']')
}

// appendJSONString appends s quoted as encoding/json quotes a string: HTML's <, > and &
// escaped, each invalid UTF-8 byte replaced by U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
