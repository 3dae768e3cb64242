package tracing

import (
	"context"
	"encoding/hex"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// A span whose id another process must know before it exists (a run's, which the record
// stores at submit; a dispatch's, which its accept span and its detached supervisor share)
// is started with ids chosen in advance: [Tracer.WithIDs] puts them in the context and
// idGenerator hands them to the next span started from it.

type idKey struct{}

type presetIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator is the SDK's id source: the preset ids of the context, else random ones.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	p, _ := ctx.Value(idKey{}).(presetIDs)
	tid, sid := p.trace, p.span
	if !tid.IsValid() {
		tid = randomTraceID()
	}
	if !sid.IsValid() {
		sid = randomSpanID()
	}
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if p, _ := ctx.Value(idKey{}).(presetIDs); p.span.IsValid() {
		return p.span
	}
	return randomSpanID()
}

func randomTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
	}
	return id
}

func randomSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		a := rand.Uint64()
		for i := range 8 {
			id[i] = byte(a >> (8 * i))
		}
	}
	return id
}

// NewIDs returns a fresh trace id (32 hex digits) and span id (16 hex digits).
func NewIDs() (traceID, spanID string) {
	t, s := randomTraceID(), randomSpanID()
	return hex.EncodeToString(t[:]), hex.EncodeToString(s[:])
}
