package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync"

	authv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The provider talks to three API groups (core/v1, batch/v1, networking/v1), and agent-sandbox's
// agents.x-k8s.io/v1beta1 for that backend. client-go's
// clientset, and each of its typed clients, link k8s.io/client-go/kubernetes/scheme, whose init
// registers every API group Kubernetes has: 650 KB and 3-14 ms that every agora process (each
// CLI command, each hook) would pay before main, kubernetes target or not. So the provider
// names the part of the API it uses as interfaces below, and builds its client over a scheme of
// just those groups, made when a kubernetes target is first used. client-go's generic typed
// client's requests are made by typed (typed.go) as the generated clients make them; a clientset
// (a test's fake, or a real one) satisfies the same interfaces through clientsetAPI in the tests.

// resourceAPI is what the provider does with one kind of object: the methods of client-go's
// typed clients, with their signatures.
type resourceAPI[T, L any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

type (
	podsAPI interface {
		resourceAPI[*corev1.Pod, *corev1.PodList]
		GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
	}
	secretsAPI  = resourceAPI[*corev1.Secret, *corev1.SecretList]
	nodesAPI    = resourceAPI[*corev1.Node, *corev1.NodeList]
	jobsAPI     = resourceAPI[*batchv1.Job, *batchv1.JobList]
	policiesAPI = resourceAPI[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]
	sandboxAPI  = resourceAPI[*sandboxObject, *sandboxList]
)

// clusterAPI is the provider's view of a cluster, shaped like a clientset so call sites read
// the same: p.client.BatchV1().Jobs(ns).Get(...).
type clusterAPI interface {
	CoreV1() coreAPI
	BatchV1() batchAPI
	NetworkingV1() networkingAPI
	// AgentsV1beta1 is agent-sandbox's API (agentsandbox.go), used by that backend only.
	AgentsV1beta1() agentsAPI
	// ExtensionsV1beta1 is agent-sandbox's extensions (agentsandbox_ext.go): a pool's
	// template, warm pool and claims.
	ExtensionsV1beta1() extAPI
	// TokenReviews verifies pool pods' projected tokens (pool_verify.go).
	TokenReviews() tokenReviewsAPI
}

type coreAPI interface {
	Pods(namespace string) podsAPI
	Secrets(namespace string) secretsAPI
	Nodes() nodesAPI
}

type batchAPI interface {
	Jobs(namespace string) jobsAPI
}

type networkingAPI interface {
	NetworkPolicies(namespace string) policiesAPI
}

type agentsAPI interface {
	Sandboxes(namespace string) sandboxAPI
}

// apiScheme holds the groups the provider uses; each group's AddToScheme also registers
// meta/v1's options (ListOptions and the like) under it, which the parameter codec encodes into
// the query. Built on first use, when a kubernetes target's provider is made.
type apiScheme struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	params runtime.ParameterCodec
}

var providerScheme = sync.OnceValues(func() (apiScheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme, networkingv1.AddToScheme, addAgentsToScheme, addExtToScheme, authv1.AddToScheme} {
		if err := add(s); err != nil {
			return apiScheme{}, fmt.Errorf("kubernetes scheme: %w", err)
		}
	}
	return apiScheme{scheme: s, codecs: serializer.NewCodecFactory(s), params: runtime.NewParameterCodec(s)}, nil
})

// restCluster is clusterAPI over the cluster's REST API: one rest client per group, sharing
// one HTTP client (its connections and credentials), as a clientset does.
type restCluster struct {
	core, batch, networking, agents, ext, auth rest.Interface
	params                                     runtime.ParameterCodec
	http                                       *http.Client
}

// newRESTCluster builds the provider's client for cfg. It does not contact the cluster.
func newRESTCluster(cfg *rest.Config) (*restCluster, error) {
	sch, err := providerScheme()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c := &restCluster{params: sch.params, http: httpClient}
	for _, g := range []struct {
		into    *rest.Interface
		apiPath string
		gv      schema.GroupVersion
	}{
		{&c.core, "/api", corev1.SchemeGroupVersion},
		{&c.batch, "/apis", batchv1.SchemeGroupVersion},
		{&c.networking, "/apis", networkingv1.SchemeGroupVersion},
		{&c.agents, "/apis", agentsGroupVersion},
		{&c.ext, "/apis", extGroupVersion},
		{&c.auth, "/apis", authv1.SchemeGroupVersion},
	} {
		rc, err := groupClient(cfg, httpClient, sch, g.apiPath, g.gv)
		if err != nil {
			return nil, fmt.Errorf("%s client: %w", g.gv, err)
		}
		*g.into = rc
	}
	return c, nil
}

// groupClient is the rest client of one group, configured as client-go's generated
// NewForConfigAndClient does.
func groupClient(cfg *rest.Config, h *http.Client, sch apiScheme, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := *cfg
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(sch.scheme, sch.codecs).WithoutConversion()
	c.UserAgent = cmp.Or(c.UserAgent, rest.DefaultKubernetesUserAgent())
	return rest.RESTClientForConfigAndClient(&c, h)
}

func (c *restCluster) CoreV1() coreAPI             { return restCore{c} }
func (c *restCluster) BatchV1() batchAPI           { return restBatch{c} }
func (c *restCluster) NetworkingV1() networkingAPI { return restNetworking{c} }
func (c *restCluster) AgentsV1beta1() agentsAPI    { return restAgents{c} }
func (c *restCluster) ExtensionsV1beta1() extAPI   { return restExt{c} }
func (c *restCluster) TokenReviews() tokenReviewsAPI {
	return restTokenReviews{c}
}

type (
	restCore       struct{ c *restCluster }
	restBatch      struct{ c *restCluster }
	restNetworking struct{ c *restCluster }
	restAgents     struct{ c *restCluster }
	restExt        struct{ c *restCluster }
)

// restPods adds the log subresource, as client-go's pods client does.
type restPods struct {
	*typed[*corev1.Pod, *corev1.PodList]
}

func (p restPods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return p.rc.Get().Namespace(p.namespace).Name(name).Resource("pods").SubResource("log").VersionedParams(opts, p.params)
}

func (r restCore) Pods(ns string) podsAPI {
	return restPods{newTyped(r.c.core, r.c.params, "pods", ns,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })}
}

func (r restCore) Secrets(ns string) secretsAPI {
	return newTyped(r.c.core, r.c.params, "secrets", ns,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

func (r restCore) Nodes() nodesAPI {
	return newTyped(r.c.core, r.c.params, "nodes", "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

func (r restBatch) Jobs(ns string) jobsAPI {
	return newTyped(r.c.batch, r.c.params, "jobs", ns,
		func() *batchv1.Job { return &batchv1.Job{} }, func() *batchv1.JobList { return &batchv1.JobList{} })
}

func (r restNetworking) NetworkPolicies(ns string) policiesAPI {
	return newTyped(r.c.networking, r.c.params, "networkpolicies", ns,
		func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} },
		func() *networkingv1.NetworkPolicyList { return &networkingv1.NetworkPolicyList{} })
}

func (r restAgents) Sandboxes(ns string) sandboxAPI {
	c := newTyped(r.c.agents, r.c.params, "sandboxes", ns,
		func() *sandboxObject { return &sandboxObject{} }, func() *sandboxList { return &sandboxList{} })
	c.jsonOnly = true
	return c
}
