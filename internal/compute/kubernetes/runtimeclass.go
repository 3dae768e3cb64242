package kubernetes

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A target's runtime_class that names no RuntimeClass of the cluster never fails on its own:
// the apiserver refuses the Job's pod ("RuntimeClass ... not found"), the Job controller says
// so in an event only (agora's Role reads no events) and retries for ever, and the dispatch
// would wait out its whole timeout with no pod. So Start asks first, when it may: a
// RuntimeClass is cluster-scoped, and reading one needs `get` on runtimeclasses
// (node.k8s.io), which the ClusterRole in docs/providers-k8s.md grants; without it the
// answer is 403 and Start goes on as before.

// runtimeClassReader is a cluster client that can tell whether a RuntimeClass exists. The
// REST client is one; a test's fake clientset is not, and its Starts skip the check.
type runtimeClassReader interface {
	runtimeClassExists(ctx context.Context, name string) error
}

// runtimeClassExists is a GET of the RuntimeClass answered as metadata only (it holds nothing
// agora needs but its existence), through the core group's client with an absolute path: the
// provider's scheme need not know node.k8s.io.
func (c *restCluster) runtimeClassExists(ctx context.Context, name string) error {
	body, err := c.core.Get().AbsPath("/apis/node.k8s.io/v1/runtimeclasses", name).
		SetHeader("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").
		Stream(ctx)
	if err != nil {
		return err
	}
	return body.Close()
}

// checkRuntimeClass refuses a Start whose runtime_class the cluster does not have. Any answer
// but 404 (a 403 where the Role lacks the ClusterRole, an apiserver that does not answer) lets
// the Start go on: the Job's own requests then meet the same cluster.
func (p *Provider) checkRuntimeClass(ctx context.Context) error {
	rc := p.opts.RuntimeClass
	r, ok := p.client.(runtimeClassReader)
	if rc == "" || !ok {
		return nil
	}
	if err := r.runtimeClassExists(ctx, rc); apierrors.IsNotFound(err) {
		return missingRuntimeClass(rc)
	}
	return nil
}

func missingRuntimeClass(rc string) error {
	return fmt.Errorf("runtime_class %q: the cluster has no RuntimeClass of that name, so no pod of this target can start "+
		"(kubectl get runtimeclass lists them; the cluster's operator makes one, e.g. with handler runsc for gVisor: docs/providers-k8s.md)", rc)
}

// ProbeRuntimeClass is doctor's check of a kubernetes target's runtime_class, the one Start
// makes: an error when the cluster has no RuntimeClass of that name; checked false when
// agora's account may not read RuntimeClasses (the ClusterRole in docs/providers-k8s.md is
// not bound), so nobody can say. An empty name is checked and fine.
func ProbeRuntimeClass(ctx context.Context, kubeconfig, kubeContext, name string) (checked bool, err error) {
	if name == "" {
		return true, nil
	}
	c, server, err := probeClient(kubeconfig, kubeContext)
	if err != nil {
		return false, err
	}
	err = c.(runtimeClassReader).runtimeClassExists(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return true, missingRuntimeClass(name)
	case apierrors.IsForbidden(err):
		return false, nil
	}
	return false, fmt.Errorf("the API server at %s: check runtime_class %q: %w", server, name, err)
}
