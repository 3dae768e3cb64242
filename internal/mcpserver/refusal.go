package mcpserver

import (
	"cmp"
	"context"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeRefusalStdio serves a stdio client that agora cannot serve (its AGORA_HOME is missing
// or not initialised) so that the client shows why: a client shows a server that exits at once
// only as "Connection closed" and keeps its stderr out of sight. The server answers
// initialize, with msg as its instructions, lists the tools ceiling allows, and answers every
// tool call with msg as the tool's error. It reaches no catalog, dispatcher or audit log: there is none to reach, and nothing
// is done. It returns when the client disconnects or ctx ends.
func ServeRefusalStdio(ctx context.Context, in io.Reader, out io.Writer, ceiling Ceiling, msg, version string) error {
	version = cmp.Or(version, "dev")
	m := mcp.NewServer(&mcp.Implementation{Name: "agora", Title: "agora", Version: version}, &mcp.ServerOptions{
		Instructions: "agora cannot serve: " + msg,
		HasTools:     true,
	})
	refuse := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return toolError("agora cannot serve: " + msg), nil
	}
	for _, t := range tools() {
		if ceiling.Allows(t.tier) {
			m.AddTool(t.mcpTool(), refuse)
		}
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}, MaxLineLength: maxStdioLine}
	return m.Run(ctx, t)
}
