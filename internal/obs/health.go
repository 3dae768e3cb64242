package obs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/agora-dev/agora/internal/store"
)

// Health answers /healthz and /readyz.
type Health struct {
	Engine EngineStats
	// DBs are the databases that must take a write, by the name /readyz reports
	// (orch.db, agora.db).
	DBs []NamedDB
	Log *slog.Logger
}

// NamedDB is a database and the name /readyz gives it.
type NamedDB struct {
	Name string
	DB   *store.DB
}

// Healthz answers 200 while the process serves HTTP at all (liveness).
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok\n"))
	})
}

// Readiness is /readyz's answer.
type Readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"` // name -> "ok" or what is wrong
}

// errProbe rolls the readiness write back.
var errProbe = errors.New("readiness probe: roll back")

// Check takes a write transaction on every database (rolled back: nothing changes, but a
// read-only file, a full lock or a broken disk fails it) and asks the engine for its state.
// What is wrong is named without paths or error text; the log has the error.
func (h *Health) Check(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	rd := Readiness{Ready: true, Checks: map[string]string{}}
	fail := func(name, what string, err error) {
		rd.Ready = false
		rd.Checks[name] = what
		if h.Log != nil {
			h.Log.Warn("not ready", "check", name, "err", err)
		}
	}
	for _, d := range h.DBs {
		err := d.DB.Tx(ctx, func(tx *sql.Tx) error {
			// A write statement that changes nothing still needs the database writable.
			if _, err := tx.ExecContext(ctx, `UPDATE audit_tree SET size = size WHERE id = -1`); err != nil {
				return err
			}
			return errProbe
		})
		if errors.Is(err, errProbe) {
			rd.Checks[d.Name] = "ok"
		} else {
			fail(d.Name, "not writable", err)
		}
	}
	if h.Engine == nil {
		fail("engine", "not running", errors.New("no engine"))
	} else if _, err := h.Engine.Stats(ctx); err != nil {
		fail("engine", "not running", err)
	} else {
		rd.Checks["engine"] = "ok"
	}
	return rd
}

// Readyz answers 200 when every database takes a write and the engine answers, 503
// otherwise, with a JSON [Readiness] either way.
func (h *Health) Readyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := h.Check(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		status := http.StatusOK
		if !rd.Ready {
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(rd)
	})
}
