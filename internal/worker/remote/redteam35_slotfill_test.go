package remote

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// The filler fetches a directory place into a temporary directory
// inside the place's own volume (.agora-fill, so its entries move in by rename) and removes it
// after. A bundle or an input of the dispatch's with an entry of that very name: the merge took
// the temporary directory for the entry (a directory both have), moved the entry's files into
// the temporary directory, and the removal threw them away; a file of that name failed the
// fill. A cold pod's place has the entry as the host has it; so must a slot's.
func TestRedTeam35_FillKeepsAnEntryNamedAsItsTemp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
	}{
		{"directory", map[string]string{"a.txt": "a", fillTmp + "/kept.txt": "kept", fillTmp + "/sub/deep.txt": "deep", "z/z.txt": "z"}},
		{"file", map[string]string{"a.txt": "a", fillTmp: "kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := t.TempDir()
			for name, body := range tc.files {
				os.MkdirAll(filepath.Dir(filepath.Join(input, name)), 0o755)
				if err := os.WriteFile(filepath.Join(input, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			mounts := []remote.Mount{{Name: "in", Dst: "/agora/inputs/in", Fetch: true}}
			url, ca := fillGateway(t, mounts, map[string]string{"in": input})
			stage, sock := fillerEnv(t, url, ca, []remote.SlotPlace{{Dst: "/agora/inputs/in"}})
			done := make(chan error, 1)
			go func() { done <- fillMain(t.Context(), os.Stderr) }()
			c, err := NewClient(url, "01FILL", "agw_fill", ca)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := handOver(t.Context(), sock, c); err != nil {
				t.Fatalf("hand over: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the filler: %v", err)
			}
			place := filepath.Join(stage, "p-0")
			for name, body := range tc.files {
				if b, err := os.ReadFile(filepath.Join(place, name)); err != nil || string(b) != body {
					t.Errorf("%s in the place: %q, %v; want %q as the host has it", name, b, err, body)
				}
			}
			ents, _ := os.ReadDir(place)
			if len(ents) != len(topLevel(tc.files)) {
				t.Errorf("the place holds %d entries, the input %d: %v", len(ents), len(topLevel(tc.files)), ents)
			}
		})
	}
}

// topLevel is the set of first path elements of files' names.
func topLevel(files map[string]string) map[string]bool {
	out := map[string]bool{}
	for name := range files {
		first, _, _ := strings.Cut(name, "/")
		out[first] = true
	}
	return out
}
