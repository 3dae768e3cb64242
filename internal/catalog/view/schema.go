package view

import "github.com/agora-dev/agora/internal/store"

// Migrations creates the catalog tables of agora.db.
//
// versions holds one row per distinct content of a name; history one row per registration or
// retirement, in order; heads the current version of each name, so resolving a name is one
// indexed lookup whatever the history's length.
var Migrations = []store.Migration{{
	Name: "catalog",
	SQL: `
CREATE TABLE catalog_versions (
	kind          TEXT NOT NULL,
	name          TEXT NOT NULL,
	digest        TEXT NOT NULL,
	size          INTEGER NOT NULL,
	registered_at TEXT NOT NULL,
	registered_by TEXT NOT NULL,
	meta          TEXT NOT NULL,
	PRIMARY KEY (kind, name, digest)
) WITHOUT ROWID;

CREATE TABLE catalog_history (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT,
	kind   TEXT NOT NULL,
	name   TEXT NOT NULL,
	action TEXT NOT NULL,
	digest TEXT,
	at     TEXT NOT NULL,
	actor  TEXT NOT NULL
);
CREATE INDEX catalog_history_name ON catalog_history(kind, name, seq);

CREATE TABLE catalog_heads (
	kind    TEXT NOT NULL,
	name    TEXT NOT NULL,
	digest  TEXT NOT NULL,
	retired INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, name)
) WITHOUT ROWID;

CREATE TABLE sealed_secrets (
	ref        TEXT PRIMARY KEY,
	sealed     BLOB NOT NULL,
	created_at TEXT NOT NULL
) WITHOUT ROWID;
`,
}}
