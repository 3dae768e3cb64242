package web

import (
	"net/http"

	"github.com/agora-dev/agora/internal/oidcauth"
)

// routes is every page, API and action. Only the login and the stylesheet it uses are served
// without a login; everything else needs one, and the actions an operator.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.loginPost)
	if s.cfg.OIDC != nil {
		mux.HandleFunc("GET /oidc/login", s.oidcStart)
		mux.HandleFunc("GET "+oidcauth.WebCallbackPath, s.oidcCallback)
	}
	mux.Handle("GET /static/app.css", staticHandler())

	in := http.NewServeMux()
	in.Handle("GET /static/", staticHandler())
	in.HandleFunc("POST /logout", s.logout)
	in.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/runs", http.StatusSeeOther) })
	// Every read takes a turn of the reads gate (gate.go): a page or an answer for its whole
	// time; the streams and the graph, which wait between reads, for each read.
	in.HandleFunc("GET /runs", s.gated(s.runsPage))
	in.HandleFunc("GET /runs/{run}", s.gated(s.runPage))
	in.HandleFunc("GET /runs/{run}/tasks/{task}", s.gated(s.taskPage))
	in.HandleFunc("GET /dispatches", s.gated(s.dispatchesPage))
	in.HandleFunc("GET /dispatches/{id}", s.gated(s.dispatchPage))
	in.HandleFunc("GET /catalog", s.gated(s.catalogPage))
	in.HandleFunc("GET /audit", s.gated(s.auditPage))
	in.HandleFunc("GET /api/runs", s.gated(s.apiRuns))
	in.HandleFunc("GET /api/runs/{run}", s.gated(s.apiRun))
	in.HandleFunc("GET /api/runs/{run}/graph", s.apiGraph)
	in.HandleFunc("GET /api/runs/{run}/events", s.streamed(s.runEvents))
	in.HandleFunc("GET /api/dispatches/{id}", s.gated(s.apiDispatch))
	in.HandleFunc("GET /api/dispatches/{id}/tail", s.streamed(s.dispatchTail))
	for pattern, h := range s.cfg.Mount {
		in.Handle(pattern, h)
	}
	mux.Handle("/", s.requireLogin(in))

	mux.Handle("POST /runs/{run}/cancel", s.requireOperator(s.cancelRun))
	mux.Handle("POST /runs/{run}/retry", s.requireOperator(s.retryRun))
	mux.Handle("POST /runs/{run}/tasks/{task}/cancel", s.requireOperator(s.cancelRun))
	mux.Handle("POST /runs/{run}/tasks/{task}/answer", s.requireOperator(s.answerTask))
	mux.Handle("POST /dispatches/{id}/cancel", s.requireOperator(s.cancelDispatch))
	mux.Handle("POST /dispatches/{id}/approvals/{call}/{decision}", s.requireOperator(s.decideApproval))
	return mux
}
