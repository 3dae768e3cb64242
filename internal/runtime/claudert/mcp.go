package claudert

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/agora-dev/agora/internal/strictjson"
)

// maxMCPConfigBytes caps an MCP config file.
const maxMCPConfigBytes = 1 << 20

// MCPServerNames reads an MCP config in the shape claude's --mcp-config takes,
// {"mcpServers": {"NAME": {...}, ...}} (https://code.claude.com/docs/en/mcp), and returns the
// server names, sorted, for [Grants.MCPServers]. It refuses a config over 1 MiB, one that is
// not a single well-formed object (valid UTF-8, no ambiguous keys), one without an
// "mcpServers" object, and a server name that cannot become an mcp__NAME rule; it does not
// look inside the server entries, which only claude interprets.
func MCPServerNames(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxMCPConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read MCP config: %w", err)
	}
	if len(b) > maxMCPConfigBytes {
		return nil, fmt.Errorf("read MCP config: over the %d byte limit", maxMCPConfigBytes)
	}
	if err := strictjson.CheckObject(b); err != nil {
		return nil, fmt.Errorf("read MCP config: %w", err)
	}
	top, err := decodeObject(b)
	if err != nil {
		return nil, fmt.Errorf("read MCP config: %w", err)
	}
	var servers object
	if ok, err := top.field("mcpServers", &servers); err != nil || !ok {
		return nil, errors.Join(errors.New(`read MCP config: no "mcpServers" object`), err)
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		if why := checkMCPServerName(name); why != "" {
			return nil, fmt.Errorf("read MCP config: server %q: %s", name, why)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}
