package kubernetes

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// typed is the client of one resource in one namespace ("" for a cluster-scoped one): the
// requests client-go's generated typed clients make (k8s.io/client-go/gentype's Client, with
// protobuf preferred, as the generated core, batch and networking clients ask). It is not
// gentype itself because gentype's fake half links k8s.io/client-go/testing and, through it,
// the server-side-apply machinery (structured-merge-diff, the OpenAPI models) and their inits.
type typed[T, L runtime.Object] struct {
	rc        rest.Interface
	params    runtime.ParameterCodec
	resource  string
	namespace string
	newObject func() T
	newList   func() L
	// jsonOnly: a custom resource, which the apiserver serves as JSON alone.
	jsonOnly bool
}

func newTyped[T, L runtime.Object](rc rest.Interface, params runtime.ParameterCodec, resource, namespace string, newObject func() T, newList func() L) *typed[T, L] {
	return &typed[T, L]{rc: rc, params: params, resource: resource, namespace: namespace, newObject: newObject, newList: newList}
}

// req scopes a request (its verb already chosen) to the resource and namespace.
func (c *typed[T, L]) req(r *rest.Request) *rest.Request {
	if !c.jsonOnly {
		r = r.UseProtobufAsDefaultIfPreferred(true)
	}
	return r.
		NamespaceIfScoped(c.namespace, c.namespace != "").
		Resource(c.resource)
}

func (c *typed[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := c.newObject()
	err := c.req(c.rc.Get()).Name(name).VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := c.newList()
	err := c.req(c.rc.Get()).VersionedParams(&opts, c.params).Timeout(timeoutOf(opts)).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.req(c.rc.Get()).VersionedParams(&opts, c.params).Timeout(timeoutOf(opts)).Watch(ctx)
}

func (c *typed[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := c.newObject()
	err := c.req(c.rc.Post()).VersionedParams(&opts, c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.req(c.rc.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *typed[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := c.newObject()
	err := c.req(c.rc.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, c.params).Body(data).Do(ctx).Into(out)
	return out, err
}

// timeoutOf is a list's or watch's server-side timeout as the request's client-side one, as
// gentype sets it.
func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
