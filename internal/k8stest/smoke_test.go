package k8stest

import (
	"errors"
	"strings"
	"testing"
)

// The smoke set: by default (AGORA_K8S_REAL_NODE unset) a real-node test outside it gets a
// loud skip naming how to run it, one in it gets the node; =1 gives every test one, =0 none.
func TestRealNodeWanted(t *testing.T) {
	for _, c := range []struct {
		env, name string
		want      bool
	}{
		{"", "TestDispatch_RealPodSamePatchAsLocal", true},
		{"", "TestDispatch_RealPodSamePatchAsLocal/sub", true},
		{"", "TestDispatch_RealPodGVisor", false},
		{"smoke", "TestRealNodeNetpol_DispatchReachesOnlyTheGateway", true},
		{"smoke", "TestRealNodeLeaderKill", false},
		{"smoke", "TestRealNodeDeployManifests", false},
		{"1", "TestRealNodeDeployManifests", true},
		{"0", "TestDispatch_RealPodSamePatchAsLocal", false},
	} {
		t.Run(c.env+c.name, func(t *testing.T) {
			t.Setenv("AGORA_K8S_REAL_NODE", c.env)
			err := realNodeWanted(named{t, c.name})
			if (err == nil) != c.want {
				t.Fatalf("AGORA_K8S_REAL_NODE=%q %s: %v, want a node %v", c.env, c.name, err, c.want)
			}
			var skip *skipError
			if err != nil && (!errors.As(err, &skip) || !strings.Contains(err.Error(), "SKIP: ") ||
				(c.env != "0" && !strings.Contains(err.Error(), "AGORA_K8S_REAL_NODE=1"))) {
				t.Errorf("the skip does not say how to run it: %v", err)
			}
		})
	}
}

// named is a testing.TB answering Name with another test's name.
type named struct {
	testing.TB
	name string
}

func (n named) Name() string { return n.name }
