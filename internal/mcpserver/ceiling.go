package mcpserver

import "fmt"

// Ceiling is the most a client may do, fixed by whoever configured its credential. The tiers
// are ordered: a ceiling allows its own tier and every tier below it.
type Ceiling int

// The tiers. The zero Ceiling allows nothing.
const (
	CeilingRead        Ceiling = iota + 1 // lists, describe, orchestrator status and watch
	CeilingDispatch                       // plus dispatch and cancel
	CeilingOrchestrate                    // plus orchestrator submit
)

// Ceilings lists every tier, lowest first.
var Ceilings = []Ceiling{CeilingRead, CeilingDispatch, CeilingOrchestrate}

func (c Ceiling) String() string {
	switch c {
	case CeilingRead:
		return "read"
	case CeilingDispatch:
		return "dispatch"
	case CeilingOrchestrate:
		return "orchestrate"
	}
	return "none"
}

// Allows reports whether a client with ceiling c may use a tool that needs tier.
func (c Ceiling) Allows(tier Ceiling) bool {
	return c >= CeilingRead && c <= CeilingOrchestrate && tier >= CeilingRead && tier <= c
}

// ParseCeiling parses "read", "dispatch" or "orchestrate".
func ParseCeiling(s string) (Ceiling, error) {
	for _, c := range Ceilings {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown ceiling %q; ceilings: read, dispatch, orchestrate", s)
}

// Principal is who is calling: the client's configured name and its ceiling. Over HTTP both
// come from the token the request carried; over stdio from the command line.
type Principal struct {
	Client  string
	Ceiling Ceiling
}
