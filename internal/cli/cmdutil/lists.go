package cmdutil

import (
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// QuoteAll is each of ss quoted (Go syntax: an agent's or a manifest's text cannot break
// the line), comma-separated.
func QuoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// OrNone quotes a grant list, or says it is empty.
func OrNone(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return QuoteAll(items)
}

// RuleStrings is each egress rule as people read it: host[:port], then methods and paths.
func RuleStrings(rules []grant.EgressRule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.String()
	}
	return out
}
