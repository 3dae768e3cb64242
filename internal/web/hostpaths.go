package web

import (
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// A read-only viewer learns what ran, not where it ran from: paths on the serving host (a
// run's or a dispatch's repository, an agent CLI's host path) are replaced before a page or
// an API answer reaches anyone but an operator. The keys are those of agora's audit details
// and records that hold host paths; everything else is shown as recorded.
var hostPathKeys = map[string]bool{"repo": true, "host_path": true}

const hiddenPath = "(host path hidden)"

// hideHostPaths returns v with every non-empty string under a host-path key replaced, at any
// depth. v is not changed: the copy shares nothing that is replaced.
func hideHostPaths(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if s, ok := e.(string); ok && hostPathKeys[k] && s != "" {
				out[k] = hiddenPath
				continue
			}
			out[k] = hideHostPaths(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = hideHostPaths(e)
		}
		return out
	}
	return v
}

func runForViewer(r api.Run, operator bool) api.Run {
	if !operator && r.Repo != "" {
		r.Repo = hiddenPath
	}
	return r
}

func recordForViewer(rec *dispatch.Record, operator bool) *dispatch.Record {
	if operator || rec.Repo == "" {
		return rec
	}
	cp := *rec
	cp.Repo = hiddenPath
	return &cp
}
