package catalogcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
)

func TestBindingChanges(t *testing.T) {
	a := catalog.Binding{Hosts: []string{"a.example"}}
	b := catalog.Binding{Hosts: []string{"b.example"}, Headers: []string{"X-Key"}}
	got := bindingChanges(map[string]catalog.Binding{"KEEP": a, "MOVE": a, "DROP": a}, map[string]catalog.Binding{"KEEP": a, "MOVE": b, "NEW": b})
	want := []string{
		"unbind DROP (was -> a.example (in Authorization))",
		"rebind MOVE -> b.example (in Authorization, X-Key) (was -> a.example (in Authorization))",
		"bind   NEW -> b.example (in Authorization, X-Key)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bindingChanges mismatch (-want +got):\n%s", diff)
	}
}
