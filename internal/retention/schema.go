package retention

import "github.com/agora-dev/agora/internal/store"

// Migrations creates the table of recorded purges in agora.db. A row is written, with its
// retention.purged audit entry, in one transaction BEFORE the blob is deleted; done is set once
// the blob is gone (or found needed again and kept). A row with done = 0 is a purge a crash
// interrupted: the next sweep finishes it.
var Migrations = []store.Migration{{
	Name: "retention purges",
	SQL: `
CREATE TABLE retention_purged (
	dispatch_id TEXT NOT NULL,
	product     TEXT NOT NULL,   -- patch, output:PATH, input, input:KEY/PATH, stdout, stderr, transcript
	digest      TEXT NOT NULL,
	class       TEXT NOT NULL,   -- blobs or logs: the retention that aged it out
	audit_seq   INTEGER NOT NULL,
	purged_at   TEXT NOT NULL,
	done        INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (dispatch_id, product)
) WITHOUT ROWID;
CREATE INDEX retention_purged_pending ON retention_purged(done, digest);
`,
}}
