package kubernetes

import (
	"context"
	"encoding/json"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// agent-sandbox's extensions: SandboxTemplate, SandboxWarmPool and SandboxClaim,
// extensions.agents.x-k8s.io/v1beta1 (v0.5.6), which the pool slots use (pool.go).
var extGroupVersion = schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1beta1"}

// The CRDs a pool needs besides SandboxCRD.
const (
	SandboxTemplateCRD = "sandboxtemplates.extensions.agents.x-k8s.io"
	SandboxWarmPoolCRD = "sandboxwarmpools.extensions.agents.x-k8s.io"
	SandboxClaimCRD    = "sandboxclaims.extensions.agents.x-k8s.io"
)

// extObject is one object of the extensions: its spec and status kept as the apiserver's JSON,
// so nothing a later version (or an editor) set is dropped on the way to agora's checks, which
// read them through the typed views below.
type extObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              json.RawMessage `json:"spec,omitempty"`
	Status            json.RawMessage `json:"status,omitempty"`
}

type extList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []extObject `json:"items"`
}

// One Go type per kind: a scheme maps a type to its kinds, and a type of three kinds would
// encode under any of them.
type (
	templateObject struct{ extObject }
	warmPoolObject struct{ extObject }
	claimObject    struct{ extObject }
	templateList   struct{ extList }
	warmPoolList   struct{ extList }
	claimList      struct{ extList }
)

func (o *templateObject) DeepCopyObject() runtime.Object { return jsonCopy(o) }
func (o *warmPoolObject) DeepCopyObject() runtime.Object { return jsonCopy(o) }
func (o *claimObject) DeepCopyObject() runtime.Object    { return jsonCopy(o) }
func (l *templateList) DeepCopyObject() runtime.Object   { return jsonCopy(l) }
func (l *warmPoolList) DeepCopyObject() runtime.Object   { return jsonCopy(l) }
func (l *claimList) DeepCopyObject() runtime.Object      { return jsonCopy(l) }

// addExtToScheme registers the extensions' kinds and meta/v1's options under their group.
func addExtToScheme(s *runtime.Scheme) error {
	for kind, obj := range map[string]runtime.Object{
		"SandboxTemplate": &templateObject{}, "SandboxTemplateList": &templateList{},
		"SandboxWarmPool": &warmPoolObject{}, "SandboxWarmPoolList": &warmPoolList{},
		"SandboxClaim": &claimObject{}, "SandboxClaimList": &claimList{},
	} {
		s.AddKnownTypeWithName(extGroupVersion.WithKind(kind), obj)
	}
	metav1.AddToGroupVersion(s, extGroupVersion)
	return nil
}

type (
	templatesAPI = resourceAPI[*templateObject, *templateList]
	warmPoolsAPI = resourceAPI[*warmPoolObject, *warmPoolList]
	claimsAPI    = resourceAPI[*claimObject, *claimList]
)

// extAPI is agent-sandbox's extensions API.
type extAPI interface {
	SandboxTemplates(namespace string) templatesAPI
	SandboxWarmPools(namespace string) warmPoolsAPI
	SandboxClaims(namespace string) claimsAPI
}

// tokenReviewsAPI is authentication.k8s.io/v1's TokenReview: the pool's gateway verifies a
// pool pod's projected token with it (pool_verify.go).
type tokenReviewsAPI interface {
	Create(ctx context.Context, tr *authv1.TokenReview, opts metav1.CreateOptions) (*authv1.TokenReview, error)
}

func (r restExt) SandboxTemplates(ns string) templatesAPI {
	c := newTyped(r.c.ext, r.c.params, "sandboxtemplates", ns,
		func() *templateObject { return &templateObject{} }, func() *templateList { return &templateList{} })
	c.jsonOnly = true
	return c
}

func (r restExt) SandboxWarmPools(ns string) warmPoolsAPI {
	c := newTyped(r.c.ext, r.c.params, "sandboxwarmpools", ns,
		func() *warmPoolObject { return &warmPoolObject{} }, func() *warmPoolList { return &warmPoolList{} })
	c.jsonOnly = true
	return c
}

func (r restExt) SandboxClaims(ns string) claimsAPI {
	c := newTyped(r.c.ext, r.c.params, "sandboxclaims", ns,
		func() *claimObject { return &claimObject{} }, func() *claimList { return &claimList{} })
	c.jsonOnly = true
	return c
}

// restTokenReviews creates TokenReviews (cluster-scoped, create only).
type restTokenReviews struct{ c *restCluster }

func (r restTokenReviews) Create(ctx context.Context, tr *authv1.TokenReview, opts metav1.CreateOptions) (*authv1.TokenReview, error) {
	out := &authv1.TokenReview{}
	err := r.c.auth.Post().Resource("tokenreviews").VersionedParams(&opts, r.c.params).Body(tr).Do(ctx).Into(out)
	return out, err
}
