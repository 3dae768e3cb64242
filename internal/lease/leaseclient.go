package lease

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// leaseAPI is what the elector does with Leases in its namespace.
type leaseAPI interface {
	Get(ctx context.Context, name string) (*coordv1.Lease, error)
	Create(ctx context.Context, l *coordv1.Lease) (*coordv1.Lease, error)
	Update(ctx context.Context, l *coordv1.Lease) (*coordv1.Lease, error)
}

// leaseClient is a REST client of coordination.k8s.io/v1 Leases over a scheme of that group
// alone, made when Elect is called. client-go's typed coordination client (and so its
// leaderelection package) links k8s.io/client-go/kubernetes/scheme, whose init registers every
// API group: 650 KB allocated before main in every agora process (internal/inittrace_test.go),
// kubernetes or not. internal/compute/kubernetes avoids it the same way.
type leaseClient struct {
	rc        *rest.RESTClient
	params    runtime.ParameterCodec
	namespace string
}

func newLeaseClient(kubeconfig, namespace string, d time.Duration) (*leaseClient, error) {
	cfg, err := restConfig(kubeconfig, d)
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := coordv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("leader: scheme: %w", err)
	}
	metav1.AddToGroupVersion(s, coordv1.SchemeGroupVersion)
	codecs := serializer.NewCodecFactory(s)
	gv := coordv1.SchemeGroupVersion
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(s, codecs).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err)
	}
	return &leaseClient{rc: rc, params: runtime.NewParameterCodec(s), namespace: namespace}, nil
}

func (c *leaseClient) Get(ctx context.Context, name string) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := c.rc.Get().Namespace(c.namespace).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Create(ctx context.Context, l *coordv1.Lease) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := c.rc.Post().Namespace(c.namespace).Resource("leases").Body(l).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Update(ctx context.Context, l *coordv1.Lease) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := c.rc.Put().Namespace(c.namespace).Resource("leases").Name(l.Name).Body(l).Do(ctx).Into(out)
	return out, err
}

// restConfig loads a kubeconfig file, or the in-cluster configuration when path is empty.
// Each request is bounded by a fifth of the duration, so a hung apiserver cannot hold a renew
// past the deadline.
func restConfig(path string, d time.Duration) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if path == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("leader: in-cluster configuration (set leader.kubeconfig to run outside a cluster): %w", err)
		}
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
			return nil, fmt.Errorf("leader.kubeconfig %q: %w", path, err)
		}
	}
	cfg.Timeout = d / 5
	cfg.UserAgent = "agora-leader"
	return cfg, nil
}
