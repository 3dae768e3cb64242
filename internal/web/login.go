package web

import (
	"cmp"
	"net/http"
	"strings"
)

// requireLogin serves next only to a logged-in principal; everyone else is refused: a page
// with a link to the login, an API call with 401.
func (s *Server) requireLogin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.auth.who(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agora-web"`)
			if strings.HasPrefix(r.URL.Path, "/api/") || r.Header.Get("Authorization") != "" {
				s.refuse(w, r, http.StatusUnauthorized, "unauthorized: log in with a token")
				return
			}
			s.log.Warn("web request refused", "status", http.StatusUnauthorized, "remote", r.RemoteAddr, "path", r.URL.Path, "reason", "not logged in")
			w.WriteHeader(http.StatusUnauthorized)
			s.pages.render(w, "login", s.loginData("Log in to see this page.", localPath(r.URL.RequestURI())))
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// requireOperator lets only an operator through, and on a cookie request only with the
// session's CSRF token.
func (s *Server) requireOperator(next http.HandlerFunc) http.Handler {
	return s.requireLogin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		p := principalOf(r.Context())
		if !p.operator {
			s.refuse(w, r, http.StatusForbidden, "forbidden: "+p.name+" may read but not act (an operator token has ceiling orchestrate)")
			return
		}
		if !csrfOK(p, r) {
			s.refuse(w, r, http.StatusForbidden, "forbidden: the CSRF token is missing or wrong; reload the page")
			return
		}
		next(w, r)
	}))
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.pages.render(w, "login", s.loginData("", localPath(r.URL.Query().Get("next"))))
}

func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	next := localPath(r.PostFormValue("next"))
	// The token is checked first: a correct one always gets in, whatever others sent.
	p, client, ok := s.auth.verifyClient(r.PostFormValue("token"))
	if !ok {
		if !s.auth.failed(r) {
			s.log.Warn("web login refused", "remote", r.RemoteAddr, "reason", "too many wrong tokens from this source")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			s.pages.render(w, "login", s.loginData("Too many wrong tokens from this address: wait a moment.", next))
			return
		}
		s.log.Warn("web login refused", "remote", r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		s.pages.render(w, "login", s.loginData("That token is not valid here.", next))
		return
	}
	id := s.auth.newSession(p, client)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(sessionTTL.Seconds())})
	s.log.Info("web login", "client", p.name, "operator", p.operator, "remote", r.RemoteAddr)
	next = cmp.Or(next, "/")
	// Not http.Redirect, which cleans and re-escapes the target: the Location is exactly the
	// target localPath checked.
	w.Header().Set("Location", next)
	w.WriteHeader(http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	p := principalOf(r.Context())
	if !csrfOK(p, r) {
		s.refuse(w, r, http.StatusForbidden, "forbidden: the CSRF token is missing or wrong; reload the page")
		return
	}
	if c, err := r.Cookie(cookieName); err == nil {
		s.auth.endSession(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
