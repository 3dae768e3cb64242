package kubernetes

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// clientsetAPI is clusterAPI over a client-go clientset: a test's fake (with its reactors), or
// a real clientset a test builds for an admin's view. Production builds its own client
// (newRESTCluster) so that cmd/agora does not link client-go's all-groups scheme.
func clientsetAPI(cs kubernetes.Interface) clusterAPI { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) CoreV1() coreAPI             { return clientsetCore{c.cs} }
func (c clientset) BatchV1() batchAPI           { return clientsetBatch{c.cs} }
func (c clientset) NetworkingV1() networkingAPI { return clientsetNetworking{c.cs} }

type (
	clientsetCore       struct{ cs kubernetes.Interface }
	clientsetBatch      struct{ cs kubernetes.Interface }
	clientsetNetworking struct{ cs kubernetes.Interface }
)

func (c clientsetCore) Pods(ns string) podsAPI       { return c.cs.CoreV1().Pods(ns) }
func (c clientsetCore) Secrets(ns string) secretsAPI { return c.cs.CoreV1().Secrets(ns) }
func (c clientsetCore) Nodes() nodesAPI              { return c.cs.CoreV1().Nodes() }
func (c clientsetBatch) Jobs(ns string) jobsAPI      { return c.cs.BatchV1().Jobs(ns) }
func (c clientsetNetworking) NetworkPolicies(ns string) policiesAPI {
	return c.cs.NetworkingV1().NetworkPolicies(ns)
}

// AgentsV1beta1: client-go's fake clientset knows no CRDs: it answers as a cluster without
// agent-sandbox's does (404 on every request). Tests of that backend run against the real
// control plane.
func (c clientset) AgentsV1beta1() agentsAPI { return noAgents{} }

// ExtensionsV1beta1: as AgentsV1beta1, the fake knows no CRDs; TokenReviews are the
// clientset's (a fake's answer nothing authenticated).
func (c clientset) ExtensionsV1beta1() extAPI     { return nil }
func (c clientset) TokenReviews() tokenReviewsAPI { return c.cs.AuthenticationV1().TokenReviews() }

type noAgents struct{}

func (noAgents) Sandboxes(string) sandboxAPI { return noSandboxes{} }

type noSandboxes struct{}

var sandboxesResource = schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}

func (noSandboxes) Get(_ context.Context, name string, _ metav1.GetOptions) (*sandboxObject, error) {
	return nil, apierrors.NewNotFound(sandboxesResource, name)
}
func (noSandboxes) List(context.Context, metav1.ListOptions) (*sandboxList, error) {
	return nil, apierrors.NewNotFound(sandboxesResource, "")
}
func (noSandboxes) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, apierrors.NewNotFound(sandboxesResource, "")
}
func (noSandboxes) Create(_ context.Context, sb *sandboxObject, _ metav1.CreateOptions) (*sandboxObject, error) {
	return nil, apierrors.NewNotFound(sandboxesResource, sb.Name)
}
func (noSandboxes) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	return apierrors.NewNotFound(sandboxesResource, name)
}
func (noSandboxes) Patch(_ context.Context, name string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*sandboxObject, error) {
	return nil, apierrors.NewNotFound(sandboxesResource, name)
}
