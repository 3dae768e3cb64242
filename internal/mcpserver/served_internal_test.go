package mcpserver

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestServed_BareSchemaUnlessHeaderAnnotated: the SDK server holds each tool with the bare
// object schema only while its published schema carries no x-mcp-header annotation (the SDK's
// per-call header check then has nothing to check); a schema with one keeps it, so the SDK
// still checks the Mcp-Param headers it names. The published tool is never changed.
func TestServed_BareSchemaUnlessHeaderAnnotated(t *testing.T) {
	for _, tl := range tools() {
		if bytes.Contains(tl.schema, []byte("x-mcp-header")) {
			t.Errorf("%s: its schema names x-mcp-header; the test's second half no longer covers every tool", tl.name)
		}
		got, _ := tl.served().InputSchema.(json.RawMessage)
		if !bytes.Equal(got, bareObject) {
			t.Errorf("%s served with input schema %s, want %s", tl.name, got, bareObject)
		}
		pub, _ := tl.mcpTool().InputSchema.(json.RawMessage)
		if !bytes.Equal(pub, tl.schema) {
			t.Errorf("%s published with input schema %s, want its own %s", tl.name, pub, tl.schema)
		}
	}
	annotated := tool{name: "x_annotated", schema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"additionalProperties":false}`)}
	got, _ := annotated.served().InputSchema.(json.RawMessage)
	if !bytes.Equal(got, annotated.schema) {
		t.Errorf("a schema with x-mcp-header is served as %s, want it whole: %s", got, annotated.schema)
	}
}
