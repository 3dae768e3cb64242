package k8stest

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestHoldCluster is scripts/k8s-cluster.sh: a cluster for a person to poke at with kubectl.
// It copies the admin kubeconfig to $AGORA_K8S_HOLD and keeps the cluster until interrupted.
func TestHoldCluster(t *testing.T) {
	out := os.Getenv("AGORA_K8S_HOLD")
	if out == "" {
		t.Skip("SKIP: a cluster held for manual use: run scripts/k8s-cluster.sh")
	}
	c := Start(t, Options{RealNode: os.Getenv("AGORA_K8S_REAL_NODE") == "1", InClusterAPI: os.Getenv("AGORA_K8S_IN_CLUSTER_API") == "1"})
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("cluster up in %s: %s, node %s, namespace %s\n", c.StartTime, c.Server, c.Node, c.Namespace)
	fmt.Printf("  export KUBECONFIG=%s\n  logs: %s/*.log\n  ^C stops it\n", out, c.Dir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	_ = os.Remove(out)
}
