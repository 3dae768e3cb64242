package remote

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// TestRedTeam32_FetchRefusesAPlantedPlace (the job before the claim):
// acb31d4 makes a slot's worker refuse to fetch a mount into a place that is not empty, since
// whatever ran in the slot before its claim could have planted files there. A place planted
// as a symlink to an empty directory passed that check (os.ReadDir follows it) and the
// workspace was fetched through it into the planter's directory, where the planter can add
// files after the check. A place must be absent or a real empty directory.
func TestRedTeam32_FetchRefusesAPlantedPlace(t *testing.T) {
	content := t.TempDir()
	if err := os.WriteFile(filepath.Join(content, "README"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || filepath.Base(r.URL.Path) != "workspace" {
			json.NewEncoder(w).Encode(remote.Info{Dispatch: "01PLANT", Version: Version(), Mounts: []remote.Mount{
				{Name: "workspace", Dst: "/agora/workspace", Fetch: true, Writable: true}}})
			return
		}
		if err := Pack(w, content); err != nil {
			t.Error(err)
		}
	}))
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for _, plant := range []struct {
		name  string
		setup func(t *testing.T, place, elsewhere string)
		ok    bool
	}{
		{"absent", func(t *testing.T, place, elsewhere string) {}, true},
		{"empty directory", func(t *testing.T, place, elsewhere string) { os.Mkdir(place, 0o755) }, true},
		{"symlink to an empty directory", func(t *testing.T, place, elsewhere string) {
			if err := os.Symlink(elsewhere, place); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(plant.name, func(t *testing.T) {
			c, err := NewClient(srv.URL, "01PLANT", "agw_test", ca)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.tls.ServerName = "example.com"
			root, elsewhere := t.TempDir(), t.TempDir()
			place := filepath.Join(root, "workspace")
			plant.setup(t, place, elsewhere)
			err = FetchInto(t.Context(), c, root, nil, false)
			ents, _ := os.ReadDir(elsewhere)
			if plant.ok {
				if err != nil {
					t.Fatalf("FetchInto with the place %s: %v", plant.name, err)
				}
				if b, err := os.ReadFile(filepath.Join(place, "README")); err != nil || string(b) != "one\n" {
					t.Fatalf("the workspace was not fetched: %q, %v", b, err)
				}
				return
			}
			if err == nil || len(ents) > 0 {
				t.Fatalf("FetchInto with the place %s: err %v, the planter's directory holds %d entries; want a refusal and nothing fetched there", plant.name, err, len(ents))
			}
		})
	}
}
