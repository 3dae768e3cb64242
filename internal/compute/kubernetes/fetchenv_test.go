package kubernetes

import (
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// The init container's `agora worker fetch` names its routes by the dispatch id, and the
// spec's environment (which carries it) goes to the worker's container only: without the id
// of its own, fetch failed every pod on a real node with `dispatch id "" is not valid`.
func TestJobObject_FetchHasDispatchID(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	s := testSpec("01JABCDEFGHJKMNPQRSTVWXYZ0")
	env, err := splitEnv(s.Env)
	if err != nil {
		t.Fatal(err)
	}
	job := p.jobObject(jobInput{name: objectName(s.ID), id: s.ID, spec: s, env: env, mounts: testMounts()})
	inits := job.Spec.Template.Spec.InitContainers
	if len(inits) != 1 {
		t.Fatalf("%d init containers, want fetch alone", len(inits))
	}
	var got []string
	for _, e := range inits[0].Env {
		if e.Name == remote.DispatchEnv {
			got = append(got, e.Value)
			if e.ValueFrom != nil {
				t.Errorf("%s comes from %+v, want the id in the clear (it is the Job's label too)", e.Name, e.ValueFrom)
			}
		}
	}
	if len(got) != 1 || got[0] != s.ID {
		t.Errorf("fetch's %s = %q, want [%s]", remote.DispatchEnv, got, s.ID)
	}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == remote.DispatchEnv && e.ValueFrom == nil {
			t.Errorf("the worker's %s is set twice or not from the Secret: %+v", e.Name, e)
		}
	}
}
