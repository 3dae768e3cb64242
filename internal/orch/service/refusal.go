package service

import (
	"cmp"
	"log/slog"
	"net/http"
)

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = cmp.Or(w.status, code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.status = cmp.Or(w.status, http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush keeps watch streams flowing through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// logRefusals logs every request the API refused (4xx, 5xx) with its route, the run it named
// and the status: never the body or the error text, which may quote a plan. A declined
// hand-off (409) is not one: it is said where it is decided, with why (Server.handoff, and the
// resident's own line, one a minute), and a line of each here grew the resident's log without
// bound.
func logRefusals(log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status >= 400 && (sw.status != http.StatusConflict || r.Pattern != handoffRoute) {
			attrs := []any{"method", r.Method, "route", routeOf(r), "status", sw.status}
			if ref := r.PathValue("ref"); ref != "" {
				attrs = append(attrs, "run", ref)
			}
			log.Warn("refused", attrs...)
		}
	})
}

// routeOf names the route pattern that matched (or "unknown"), never the raw path.
func routeOf(r *http.Request) string {
	return cmp.Or(r.Pattern, "unknown")
}
