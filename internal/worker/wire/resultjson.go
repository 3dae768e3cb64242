package wire

import (
	"strconv"

	"github.com/agora-dev/agora/internal/jsonstr"
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
	b = jsonstr.Append(b, string(r.Status))
	b = append(b, `,"reason":`...)
	b = jsonstr.Append(b, string(r.Reason))
	b = append(b, `,"detail":`...)
	b = jsonstr.Append(b, r.Detail)
	b = append(b, `,"exit_code":`...)
	b = strconv.AppendInt(b, int64(r.ExitCode), 10)
	b = append(b, `,"phases":`...)
	b = appendList(b, r.Phases, func(b []byte, p Phase) []byte {
		b = append(b, `{"name":`...)
		b = jsonstr.Append(b, p.Name)
		b = append(b, `,"ok":`...)
		b = strconv.AppendBool(b, p.OK)
		b = append(b, `,"ms":`...)
		b = strconv.AppendInt(b, p.MS, 10)
		return append(b, '}')
	})
	if p := r.Patch; p != nil {
		b = append(b, `,"patch":{"path":`...)
		b = jsonstr.Append(b, p.Path)
		b = append(b, `,"sha256":`...)
		b = jsonstr.Append(b, p.SHA256)
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
		b = jsonstr.Append(b, s.Path)
		b = append(b, `,"why":`...)
		b = jsonstr.Append(b, s.Why)
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
	b = jsonstr.Append(b, path)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, `,"sha256":`...)
	b = jsonstr.Append(b, sha)
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
