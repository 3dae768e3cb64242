package cmdutil

import (
	"github.com/agora-dev/agora/internal/budget"
)

// usageLine renders model usage for people, with the budget it counted against:
// "1200 in (300 cached), 80 out, 3 calls, $0.0123 of budget tokens 5000".
func UsageLine(u *budget.Usage, b *budget.Budget) string {
	s := u.String()
	if b != nil && !b.IsZero() {
		s += " of budget " + b.String()
	}
	return s
}
