// Package otlprecv is an OTLP/HTTP trace receiver for tests: it decodes each export
// (go.opentelemetry.io/proto/otlp ExportTraceServiceRequest) into spans a test can walk by
// parent, and keeps every request body so a test can search all of it (attributes, events,
// resource) for a value that must not be there.
package otlprecv

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Name            string
	TraceID, SpanID string
	ParentID        string // "" for a root
	Attrs           map[string]string
	Resource        map[string]string
	StatusError     bool
	StatusMessage   string
	Start, End      time.Time
}

// Receiver is a running receiver; URL is its base, to set as OTEL_EXPORTER_OTLP_ENDPOINT.
type Receiver struct {
	URL string

	mu       sync.Mutex
	spans    []Span
	bodies   [][]byte
	requests int
	headers  []http.Header
}

// Start starts a receiver that stops when t ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Serve starts a receiver on ln (a fixed address a test watches) that stops when t ends.
func Serve(t testing.TB, ln net.Listener) *Receiver {
	r := &Receiver{}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(r.serve)}}
	srv.Start()
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	if req.URL.Path != "/v1/traces" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Add(b, &msg)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Add records one decoded export and its raw bytes (the gRPC receiver's entry point too).
func (r *Receiver) Add(raw []byte, msg *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, raw)
	for _, rs := range msg.GetResourceSpans() {
		res := kvs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Attrs: kvs(s.GetAttributes()), Resource: res,
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
				}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				if st := s.GetStatus(); st != nil && st.GetCode() == 2 {
					sp.StatusError, sp.StatusMessage = true, st.GetMessage()
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func kvs(list []*common.KeyValue) map[string]string {
	m := make(map[string]string, len(list))
	for _, kv := range list {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *common.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *common.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *common.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *common.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, value(e))
		}
		return strings.Join(parts, ",")
	}
	return ""
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests is how many HTTP requests reached the receiver, exports or not.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Headers are the headers of every request received.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Contains reports whether any export's raw bytes hold s: a planted secret must never.
func (r *Receiver) Contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// Wait waits until a span named name arrived, for at most d, and returns it; ok is false
// when none did.
func (r *Receiver) Wait(name string, d time.Duration) (Span, bool) {
	deadline := time.Now().Add(d)
	for {
		for _, s := range r.Spans() {
			if s.Name == name {
				return s, true
			}
		}
		if time.Now().After(deadline) {
			return Span{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Named returns the received spans named name.
func (r *Receiver) Named(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// ByID returns the span with the id, if received.
func (r *Receiver) ByID(id string) (Span, bool) {
	for _, s := range r.Spans() {
		if s.SpanID == id {
			return s, true
		}
	}
	return Span{}, false
}
