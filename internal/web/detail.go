package web

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Caps of what one dispatch page shows: the ends of long logs, the start of a long patch.
const (
	maxPatchShown      = 512 << 10
	maxTranscriptShown = 256 << 10
	maxLogShown        = 16 << 10
	maxCallsShown      = 2000
	// maxEntriesRead bounds a dispatch's audit entries read for its page: the newest, so a
	// dispatch that made a million calls costs what one page shows.
	maxEntriesRead = 2 * maxCallsShown
)

type dispatchView struct {
	Rec  *dispatch.Record
	Live bool
	// Cancellable is set on a live dispatch not in a run when the server can cancel it.
	Cancellable bool
	Elapsed     time.Duration
	Since       time.Time
	Stdout      string
	Stderr      string
	Transcript  string
	Patch       []diffLine
	PatchNote   string
	Calls       []callRow
	Net         []netRow
	Events      []eventRow
}

type eventRow struct {
	dispatch.Event
	Data string
}

type diffLine struct {
	Class, Text string
}

type callRow struct {
	Seq                                uint64
	At                                 time.Time
	Tool, Decision, Reason, Phase, Who string
	Rest                               string
}

type netRow struct {
	Seq                                  uint64
	At                                   time.Time
	Kind, Host, Decision, Reason, Detail string
}

func (s *Server) dispatchDetail(ctx context.Context, rec *dispatch.Record) *dispatchView {
	v := &dispatchView{Rec: rec, Live: !lifecycle.DispatchEnded(rec.State), Elapsed: elapsed(rec, s.now())}
	// The view is masked whole when shown; what is cut here is masked before its cut.
	m := s.mask(ctx, rec.Repo)
	v.Since = rec.CreatedAt
	if rec.StartedAt != nil {
		v.Since = *rec.StartedAt
	}
	for _, e := range rec.Events {
		v.Events = append(v.Events, eventRow{Event: e, Data: compactJSON(e.Data)})
	}
	if v.Live {
		if s.src.Live != nil {
			l := s.src.Live(rec.ID)
			v.Stdout, v.Stderr = tailShown(l.Stdout, tailBytes, m), tailShown(l.Stderr, tailBytes, m)
		}
	} else if res := rec.Result; res != nil && s.src.Blob != nil {
		v.Stdout = s.blobTail(res.Stdout, m)
		v.Stderr = s.blobTail(res.Stderr, m)
		if res.Transcript != nil {
			v.Transcript = s.blobHead(res.Transcript, maxTranscriptShown, m)
		}
		if res.Patch != nil {
			text := s.blobHead(res.Patch, maxPatchShown, m)
			if res.Patch.Size > maxPatchShown {
				v.PatchNote = fmt.Sprintf("the patch is %d bytes; the first %d are shown ('agora dispatch patch %s' prints it all)", res.Patch.Size, maxPatchShown, rec.ID)
			}
			v.Patch = diffLines(text)
		}
	}
	if s.src.MainLog != nil {
		recs, err := audit.List(ctx, s.src.MainLog, audit.ListOptions{Subject: entry.Dispatch(rec.ID), Limit: maxEntriesRead})
		if err != nil {
			s.log.Warn("web: read a dispatch's audit entries", "dispatch_id", rec.ID, "err", err)
		}
		for _, e := range recs {
			switch {
			case e.Kind == entry.ToolCall && len(v.Calls) < maxCallsShown:
				v.Calls = append(v.Calls, callOf(e))
			case strings.HasPrefix(e.Kind, entry.NetPrefix) && len(v.Net) < maxCallsShown:
				v.Net = append(v.Net, netOf(e))
			}
		}
	}
	return v
}

func (s *Server) blobTail(a *dispatch.Artifact, m *hostpath.Mask) string {
	if a == nil {
		return ""
	}
	b, err := s.src.Blob(a.Digest, 0)
	if err != nil {
		return "(could not be read)"
	}
	return tailShown(b, maxLogShown, m)
}

func (s *Server) blobHead(a *dispatch.Artifact, n int, m *hostpath.Mask) string {
	b, err := s.src.Blob(a.Digest, 0)
	if err != nil {
		return "(could not be read)"
	}
	return headShown(b, n, m)
}

// diffLines classes each line of a unified diff for colour; the text is shown as it is.
func diffLines(text string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		c := "ctx"
		switch {
		case strings.HasPrefix(l, "diff --git"), strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "index "),
			strings.HasPrefix(l, "new file"), strings.HasPrefix(l, "deleted file"):
			c = "file"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		}
		out = append(out, diffLine{Class: c, Text: l})
	}
	return out
}

func callOf(e audit.Record) callRow {
	d := entry.ReadToolDecision(e.Details)
	return callRow{Seq: e.Seq, At: e.Time, Tool: d.Tool, Decision: d.Decision, Reason: d.Reason, Phase: d.Phase,
		Who: e.Actor, Rest: compactJSON(d.Rest)}
}

func netOf(e audit.Record) netRow {
	d := entry.ReadNet(e.Details)
	n := netRow{Seq: e.Seq, At: e.Time, Kind: e.Kind, Decision: d.Decision, Reason: d.Reason}
	if d.Host != "" {
		n.Host = d.Host + ":" + d.Port
	}
	switch e.Kind {
	case entry.NetClose:
		n.Detail = fmt.Sprintf("up %s B, down %s B, %s ms, %s requests", d.BytesUp, d.BytesDown, d.DurationMS, d.Requests)
	case entry.NetRequest:
		n.Detail = d.Method + " " + d.Path
	default:
		n.Detail = d.Via
	}
	return n
}
