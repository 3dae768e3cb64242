package dispatchcmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRedTeam33_HandoffFramesFitTheCap: whatever one write of a handed-off command carries
// (-o json writes the whole record at once; an agent chooses its 256 output names of up to
// 4 KiB, '<' and '>' included), serve's frames each fit the cap the CLI reads them under, as
// serve encodes them (json.Encoder: '<' becomes \u003c, six bytes), and carry the bytes
// unchanged, runes whole. Failed before: one write became one frame ('<' x 1 MiB: a 6 MiB
// frame), which the CLI refused as 'a frame over 4194304 bytes' and took for serve stopped
// ('the orchestrator ... stopped; reading its end here'), while the dispatch ran on.
func TestRedTeam33_HandoffFramesFitTheCap(t *testing.T) {
	cut := (api.MaxHandoffFrame - 1024) / 6 // where serve's frameWriter cuts a write
	for name, s := range map[string]string{
		// Over the cap as one frame (about 4.8 MiB as JSON), a rune across the first cut.
		"html, a rune at the cut": strings.Repeat("<", cut-1) + "日" + strings.Repeat("<>&", 34<<10),
		"small":                   "01JAAAAAAAAAAAAAAAAAAAAAAA\n",
	} {
		t.Run(name, func(t *testing.T) {
			var got strings.Builder
			frames := 0
			w := frameWriter{send: func(f api.HandoffFrame) error {
				var b bytes.Buffer
				if err := json.NewEncoder(&b).Encode(f); err != nil { // as serve's handoff sends it
					return err
				}
				fr, err := api.DecodeHandoffFrame(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
				if err != nil {
					t.Fatalf("frame %d (%d bytes) does not decode in the CLI: %v", frames, b.Len(), err)
				}
				frames++
				got.WriteString(fr.Out)
				return nil
			}}
			n, err := w.Write([]byte(s))
			if err != nil || n != len(s) {
				t.Fatalf("Write = %d, %v; want %d", n, err, len(s))
			}
			if got.String() != s {
				t.Errorf("the frames carry %d bytes that differ from the %d written", got.Len(), len(s))
			}
			t.Logf("%d bytes in %d frames", len(s), frames)
		})
	}
}
