package audit

import "github.com/agora-dev/agora/internal/store"

// Migrations creates the tables of one log. Every database that carries a log includes them.
// Append only: a released step never changes.
var Migrations = []store.Migration{{
	Name: "audit log",
	SQL: `
CREATE TABLE audit_entries (
	seq       INTEGER PRIMARY KEY,  -- leaf index, from 0
	at        TEXT NOT NULL,        -- RFC 3339 UTC
	kind      TEXT NOT NULL,
	subject   TEXT NOT NULL,
	actor     TEXT NOT NULL,
	entry     BLOB NOT NULL,        -- the canonical JSON exactly as hashed
	leaf_hash BLOB NOT NULL         -- RFC 6962: SHA-256(0x00 || entry)
);
CREATE INDEX audit_entries_kind ON audit_entries(kind, seq);
CREATE INDEX audit_entries_at ON audit_entries(at);
`,
}, {
	Name: "audit tree, checkpoints and anchors",
	SQL: `
CREATE TABLE audit_tree (
	id       INTEGER PRIMARY KEY CHECK (id = 0),
	size     INTEGER NOT NULL,      -- leaves in the tree
	frontier BLOB NOT NULL          -- roots of the perfect subtrees covering [0, size), left to right, 32 bytes each
);
CREATE TABLE audit_nodes (
	id   INTEGER PRIMARY KEY,       -- level << 56 | index: every complete RFC 6962 subtree (leaves: audit_entries.leaf_hash; older logs also have them here)
	hash BLOB NOT NULL
);
CREATE TABLE audit_checkpoints (
	size INTEGER PRIMARY KEY,
	root BLOB NOT NULL,
	note BLOB NOT NULL,             -- the C2SP signed note, exactly as signed
	at   TEXT NOT NULL              -- RFC 3339 UTC
);
CREATE TABLE audit_anchors (
	id       INTEGER PRIMARY KEY,
	size     INTEGER NOT NULL REFERENCES audit_checkpoints(size),
	anchor   TEXT NOT NULL,         -- the anchor's name, e.g. file:/mnt/worm/agora.anchor
	type     TEXT NOT NULL,         -- file, rfc3161, command
	evidence BLOB,                  -- JSON evidence when the anchor accepted the checkpoint
	error    TEXT,                  -- why it did not, otherwise
	at       TEXT NOT NULL
);
CREATE INDEX audit_anchors_size ON audit_anchors(size, anchor);
CREATE INDEX audit_anchors_anchor ON audit_anchors(anchor, size);
`,
}, {
	Name: "audit entries by subject",
	SQL:  `CREATE INDEX audit_entries_subject ON audit_entries(subject, seq);`,
}}

// SubjectKey is the expression orch.db's log is indexed by instead of the whole subject
// (orch's migration "orch audit log indexed by run"): a subject's first 30 characters, which
// are "run/" and a run's 26-character ULID for every entry the orchestrator writes about a run
// or its tasks. A run's entries then share one key and each append lands at the end of its
// run's range of the index, where an index of whole subjects put it among its tasks' subjects
// (the subject index was a sixth of a layer's commit). Every query that selects
// entries by subject also names SubjectKey (through subjectIs or underSubject), so orch.db's
// planner finds its index; agora.db keeps the whole-subject index, which the same queries use.
// The subject column is still compared exactly: the key only narrows what is read.
const SubjectKey = `substr(subject, 1, 30)`

// subjectIs is a condition on subject = ? (the subject given twice) that orch.db's
// SubjectKey index can serve.
const subjectIs = `subject = ? AND ` + SubjectKey + ` = substr(?, 1, 30)`

// UnderSubject is a condition on subject = s or below s (s + "/" ...: the range [s + "/",
// s + "0"), '0' following '/'), with [UnderSubjectArgs], that orch.db's SubjectKey index can
// serve. Every subject it matches starts with s, so its key is s's first 30 characters p, or
// (when s is shorter) p + "/" ...: in [p, p + "0").
const UnderSubject = `(subject = ? OR (subject >= ? AND subject < ?)) AND ` +
	SubjectKey + ` >= substr(?, 1, 30) AND ` + SubjectKey + ` < substr(?, 1, 30) || '0'`

// UnderSubjectArgs are [UnderSubject]'s arguments for s.
func UnderSubjectArgs(s string) []any { return []any{s, s + "/", s + "0", s, s} }
