package kubernetes

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrNoSandboxCRD means the cluster does not serve agent-sandbox's Sandbox resource: its CRD
// ([SandboxCRD]) is not installed.
var ErrNoSandboxCRD = errors.New("agent-sandbox is not installed: the cluster has no CRD " + SandboxCRD)

// ProbeAgentSandbox asks a target's cluster whether it serves agent-sandbox's Sandboxes, with
// the target's own credentials and the Role's one read (list sandboxes in the namespace), and
// returns how many Sandboxes of agora's are there (dispatches running, or ended and not yet
// deleted). It needs no CRD read rights: a 404 on the resource is the missing CRD.
func ProbeAgentSandbox(ctx context.Context, kubeconfig, kubeContext, namespace string) (int, error) {
	c, server, err := probeClient(kubeconfig, kubeContext)
	if err != nil {
		return 0, err
	}
	return probeAgentSandbox(ctx, c, server, namespace)
}

func probeAgentSandbox(ctx context.Context, c clusterAPI, server, namespace string) (int, error) {
	l, err := c.AgentsV1beta1().Sandboxes(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy})
	switch {
	case apierrors.IsNotFound(err):
		return 0, ErrNoSandboxCRD
	case apierrors.IsForbidden(err):
		return 0, fmt.Errorf("the API server at %s refuses agora's account: it may not list sandboxes in namespace %q (the Role in docs/providers-k8s.md grants it): %w", server, namespace, err)
	case err != nil:
		return 0, fmt.Errorf("the API server at %s: list sandboxes in namespace %q: %w", server, namespace, err)
	}
	return len(l.Items), nil
}
