package web

import (
	"bytes"
	"context"
	"reflect"

	"github.com/agora-dev/agora/internal/hostpath"
)

// A read-only viewer learns what ran, not where it ran from: no path on the serving host
// reaches anyone but an operator, in any string of a page, an API answer or an event stream.
// Every view is masked as a whole before it is rendered or encoded ([masked]), so a field
// added later is masked too:
//
//   - every string loses the paths known to be the host's (AGORA_HOME, the repositories of
//     the runs and dispatches shown): agent-written text included, since an agent can learn
//     its repository's path from git;
//   - text the host wrote about what happened (the fields named in hostWritten, and every
//     string inside a map: audit details, event data) also loses every other absolute path,
//     since a failure names paths nobody declared ("repository /tmp/x is not a directory");
//   - a value that is a host path by its name (hostPathNames) is hidden whole.
const hiddenPath = hostpath.Hidden

// hostWritten names the fields of views and records that hold text the host wrote.
var hostWritten = map[string]bool{"Reason": true, "Detail": true, "Details": true, "Data": true, "Rest": true, "Lines": true,
	"Note": true, "PatchNote": true, "Err": true, "RuntimeBinary": true}

// hostPathNames are map keys and field names whose value is a path on the host.
var hostPathNames = map[string]bool{"repo": true, "host_path": true, "Repo": true, "HostPath": true}

// mask is the viewer's mask for a view of objects at the known paths, nil for an operator,
// who sees everything.
func (s *Server) mask(ctx context.Context, known ...string) *hostpath.Mask {
	if principalOf(ctx).operator {
		return nil
	}
	m := hostpath.New(s.cfg.HostPaths...)
	m.Add(known...)
	return m
}

// masked returns v with every string masked by m (see above); nil m returns v. v is not
// changed: what is masked is a copy.
func masked[T any](v T, m *hostpath.Mask) T {
	if m == nil {
		return v
	}
	out := maskValue(reflect.ValueOf(&v).Elem(), m, false)
	return out.Interface().(T)
}

func maskValue(v reflect.Value, m *hostpath.Mask, host bool) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		out := m.Text(s)
		if host {
			out = m.HostText(s)
		}
		if out == s {
			return v
		}
		nv := reflect.New(v.Type()).Elem()
		nv.SetString(out)
		return nv
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(maskValue(v.Elem(), m, host))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		nv := reflect.New(v.Type()).Elem()
		nv.Set(maskValue(v.Elem(), m, host))
		return nv
	case reflect.Struct:
		nv := reflect.New(v.Type()).Elem()
		nv.Set(v)
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if hostPathNames[f.Name] && f.Type.Kind() == reflect.String {
				if v.Field(i).String() != "" {
					nv.Field(i).SetString(hiddenPath)
				}
				continue
			}
			nv.Field(i).Set(maskValue(v.Field(i), m, host || hostWritten[f.Name]))
		}
		return nv
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			// Raw JSON an agent wrote (a question's partial state): its known paths only.
			if s := m.Text(string(v.Bytes())); s != string(v.Bytes()) {
				return reflect.ValueOf([]byte(s)).Convert(v.Type())
			}
			return v
		}
		nv := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			nv.Index(i).Set(maskValue(v.Index(i), m, host))
		}
		return nv
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		nv := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k, e := it.Key(), it.Value()
			if k.Kind() == reflect.String && hostPathNames[k.String()] {
				if s, ok := e.Interface().(string); ok && s != "" {
					nv.SetMapIndex(k, reflect.ValueOf(hiddenPath).Convert(v.Type().Elem()))
					continue
				}
			}
			nv.SetMapIndex(k, maskValue(e, m, true))
		}
		return nv
	}
	return v
}

// tailShown is the end of a log from its last n bytes as text, with m's known paths hidden
// ([hostpath.Mask.Tail]: a path the cut would split is hidden whole, never its end shown). A
// nil m (an operator) sees the last n bytes as they are.
// Only the last n+cutSlack bytes are read: a cut moves by less than a path.
func tailShown(b []byte, n int, m *hostpath.Mask) string {
	return valid(m.Tail(string(b[max(len(b)-n-cutSlack, 0):]), n))
}

// headShown is the start of a text as [tailShown] is the end.
func headShown(b []byte, n int, m *hostpath.Mask) string {
	return valid(m.Head(string(b[:min(n+cutSlack, len(b))]), n))
}

// cutSlack is how far beyond a cut the text is read: twice the longest path Linux resolves.
const cutSlack = 2 * 4096

// valid is s with its invalid UTF-8 (a cut through a character) dropped.
func valid(s string) string { return string(bytes.ToValidUTF8([]byte(s), nil)) }
