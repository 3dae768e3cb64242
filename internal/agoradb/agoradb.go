// Package agoradb is the schema of agora.db: the migrations of every package that keeps
// tables there, in the order they were released. It is the one place that composes them, so
// that package home, which creates and opens the database, imports none of those packages:
// the composition root (the CLI) passes [Migrations] to home.Open and home.Init.
package agoradb

import (
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// Migrations is the schema of agora.db, in order. Append only: a released step never changes,
// and a database records how many steps it has applied, not which.
func Migrations() []store.Migration {
	var m []store.Migration
	m = append(m, audit.Migrations...)
	m = append(m, view.Migrations...)
	m = append(m, dispatch.Migrations...)
	// retention's steps came after dispatch's last: a later step of any package goes
	// after this line, never into an earlier package's list, or it would shift the steps a
	// released database has applied.
	m = append(m, retention.Migrations...)
	// The network gateway's stored sessions, then what ties them to their dispatch.
	m = append(m, netgw.SessionMigrations...)
	m = append(m, dispatch.SessionMigrations...)
	// The gateway's kept uploads, tied to their session.
	m = append(m, netgw.UploadMigrations...)
	// The learn dispatches indexed by run (the run page reads them on every load).
	m = append(m, dispatch.LearnIndexMigrations...)
	return m
}
