package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestRedTeam37_PatchInlineSaysWhenNotExact: agora escapes every hidden character in
// every string of a tool answer, the patch and final.md inline included. A patch
// is machine content: a lead applies it, and the answer names its digest. A patch of a CRLF
// file (CR is hidden), an emoji's zero-width joiner or a file's BOM came back with \x0d,
// \u200d, \ufeff in place of the bytes, under the digest of the bytes, and nothing told the
// lead; a patch holding the six characters \u202e as text looked the same as one holding
// U+202E. The text stays escaped (what a person reads), and `escaped` says when the text is
// not the bytes, so the client reads the resource (the exact bytes, which the digest names);
// text with nothing hidden (a tab, U+00A0, Hebrew and Arabic letters, the text \u202e) is
// the bytes, escaped unset. The same for final.md. Run with the official SDK client.
func TestRedTeam37_PatchInlineSaysWhenNotExact(t *testing.T) {
	head := "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-x\n+"
	for _, c := range []struct {
		name, line string
		hidden     bool
	}{
		{"crlf", "windows line\r\n", true},
		{"zwj", "family \U0001F468\u200d\U0001F469\u200d\U0001F467\n", true},
		{"bom", "\ufeffpackage x\n", true},
		{"rlo", "invoice\u202efdp.exe\n", true},
		{"plain", "tab\there, nbsp\u00a0here, \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627, emoji \u2764\ufe0f\n", false},
		{"escape-as-text", `looks escaped: \u202e \x1b \U000e0001 <U+202E>` + "\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			patch := head + c.line
			sum := sha256.Sum256([]byte(patch))
			digest := "sha256:" + hex.EncodeToString(sum[:])
			f := newFixture()
			rec := record(dispatchID, "succeeded")
			rec.Patch = &mcpserver.Artifact{Digest: digest, Size: int64(len(patch))}
			rec.Outputs = []mcpserver.Output{{Path: "final.md", Digest: "sha256:final", Size: int64(len(c.line))}}
			f.disp.content = map[string][]byte{digest: []byte(patch), "sha256:final": []byte(c.line)}
			f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return rec, nil }
			cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})

			res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID})
			noHidden(t, "describe", res.StructuredContent)
			type view struct {
				Text    string `json:"text"`
				Digest  string `json:"digest"`
				Escaped bool   `json:"escaped"`
				URI     string `json:"uri"`
			}
			var d struct {
				Results struct {
					Patch view `json:"patch"`
					Final view `json:"final"`
				} `json:"results"`
			}
			decode(t, res, &d)
			// The text block is the same JSON as the structured content.
			var fromText struct {
				Results struct {
					Patch view `json:"patch"`
				} `json:"results"`
			}
			if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || fromText.Results.Patch != d.Results.Patch {
				t.Errorf("the text block's patch %+v differs from the structured one %+v (%v)", fromText.Results.Patch, d.Results.Patch, err)
			}
			for name, v := range map[string]struct {
				view
				bytes string
			}{"patch": {d.Results.Patch, patch}, "final": {d.Results.Final, c.line}} {
				if v.Escaped != c.hidden {
					t.Errorf("%s: escaped = %v, want %v (text %q)", name, v.Escaped, c.hidden, v.Text)
				}
				if want := agenttext.Escape(v.bytes); v.Text != want {
					t.Errorf("%s: text = %q, want %q", name, v.Text, want)
				}
				if !v.Escaped && v.Text != v.bytes {
					t.Errorf("%s: text %q is not the bytes %q, and escaped is unset", name, v.Text, v.bytes)
				}
			}
			if p := d.Results.Patch; p.Digest != digest {
				t.Errorf("patch digest = %q, want %q", p.Digest, digest)
			}
			// The resource is the exact bytes the digest names.
			got, err := readResource(t, cs, d.Results.Patch.URI)
			if s := sha256.Sum256([]byte(got)); err != nil || "sha256:"+hex.EncodeToString(s[:]) != digest {
				t.Errorf("the patch resource = %q (%v), not the bytes of %s", got, err, digest)
			}
		})
	}
}
