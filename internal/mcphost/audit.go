package mcphost

import (
	"context"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// Audit is the server's [mcpserver.AuditFunc]: each entry goes through the group-commit
// batcher, and the call waits until its entry is committed.
func Audit(b *audit.Batcher) mcpserver.AuditFunc {
	return func(ctx context.Context, e mcpserver.AuditEntry) error {
		return b.Append(ctx, audit.Entry{Actor: e.Actor, Kind: e.Kind, Subject: e.Subject, Details: e.Details})
	}
}
