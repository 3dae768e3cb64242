package dispatch

import "github.com/agora-dev/agora/internal/store"

// SessionMigrations ties the network gateway's stored sessions (netgw.SessionMigrations's
// gateway_sessions, composed just before these in internal/agoradb) to their dispatch's life,
// in the database itself, so that no writer can get it wrong:
//
//   - a session is stored only for a live dispatch (accepted or started): an export for a
//     dispatch that ended, or that this database never recorded, fails;
//   - the dispatch's end deletes its session in the transaction that records the end (and its
//     audit entry), whoever records it (its supervisor, an adopter, a cancel, Reap), and so
//     does deleting the dispatch (retention).
//
// A replica restored from object storage therefore holds either a live dispatch with its
// session, or an ended one without: a session that ended on the old leader is not revived by
// the new one, and a Job whose dispatch ended there finds no session (401) wherever it
// connects.
var SessionMigrations = []store.Migration{{
	Name: "dispatch gateway sessions",
	SQL: `
CREATE TRIGGER gateway_sessions_live_insert BEFORE INSERT ON gateway_sessions
WHEN NOT EXISTS (SELECT 1 FROM dispatches WHERE id = NEW.dispatch_id AND state IN ('accepted', 'started'))
BEGIN SELECT RAISE(ABORT, 'gateway session: the dispatch is not live'); END;

CREATE TRIGGER gateway_sessions_live_update BEFORE UPDATE ON gateway_sessions
WHEN NOT EXISTS (SELECT 1 FROM dispatches WHERE id = NEW.dispatch_id AND state IN ('accepted', 'started'))
BEGIN SELECT RAISE(ABORT, 'gateway session: the dispatch is not live'); END;

CREATE TRIGGER gateway_sessions_dispatch_end AFTER UPDATE OF state ON dispatches
WHEN NEW.state NOT IN ('accepted', 'started')
BEGIN DELETE FROM gateway_sessions WHERE dispatch_id = NEW.id; END;

CREATE TRIGGER gateway_sessions_dispatch_delete AFTER DELETE ON dispatches
BEGIN DELETE FROM gateway_sessions WHERE dispatch_id = OLD.id; END;
`,
}}
