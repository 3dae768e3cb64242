package mcpserver

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxClientName caps the part of a stdio client's recorded name that the client chose.
const maxClientName = 64

// unnamedClient stands for a stdio client that gave no usable name in initialize.
const unnamedClient = "unnamed-client"

// stdioName is the name a stdio client gave itself in initialize (clientInfo.name, e.g.
// "claude-code"), fit for the audit log: letters, digits, '.', '_' and '-' kept, every other
// byte made '-', at most maxClientName bytes; unnamedClient when it gave none. It is what the
// client says it is, recorded beside the OS user, and authorises nothing.
func stdioName(session mcp.Session) string {
	ss, ok := session.(*mcp.ServerSession)
	if !ok || ss == nil {
		return unnamedClient
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ClientInfo == nil {
		return unnamedClient
	}
	return cleanClientName(ip.ClientInfo.Name)
}

// cleanClientName is name reduced to the characters a recorded name may hold.
func cleanClientName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name) && b.Len() < maxClientName; i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('-')
		}
	}
	if strings.Trim(b.String(), "-.") == "" {
		return unnamedClient
	}
	return b.String()
}
