package kubernetes

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agora-dev/agora/internal/compute/kubernetes/sandboxcheck"
)

// Backends a kubernetes target may use: a batch/v1 Job per dispatch (the default), or a
// kubernetes-sigs/agent-sandbox Sandbox per dispatch.
const (
	BackendJobs         = "jobs"
	BackendAgentSandbox = "agent-sandbox"
)

// agentsGroupVersion is agent-sandbox's core API, the storage version of its CRDs (v0.5.6).
var agentsGroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1beta1"}

// SandboxCRD is the CustomResourceDefinition the agent-sandbox backend needs in the cluster.
const SandboxCRD = "sandboxes.agents.x-k8s.io"

// The agent-sandbox backend makes one Sandbox per dispatch, holding exactly the pod spec the
// Job backend's Job holds, and no SandboxTemplate, SandboxWarmPool or SandboxClaim: agent-
// sandbox's v0.5.6 claims name a warm pool, and a pool of agora's in the namespace could be
// claimed by anyone who may create SandboxClaims there, giving them a second pod of the
// dispatch with its Secret (its token) mounted. A Sandbox is instantiated once, by its own
// controller, and has none of a template's settings that weaken isolation (a Managed
// NetworkPolicy, env injection from claims). The controller adds a Service unless told not
// to: spec.service is false (a pod that must reach nothing is reached by nothing).

// sandboxObject and its parts are agent-sandbox's Sandbox as agora reads it, in sandboxcheck
// beside the check every Sandbox agora creates or adopts passes.
type (
	sandboxObject      = sandboxcheck.Sandbox
	sandboxSpec        = sandboxcheck.Spec
	sandboxPodTemplate = sandboxcheck.PodTemplate
	sandboxPodMetadata = sandboxcheck.PodMetadata
)

type sandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []sandboxObject `json:"items"`
}

// DeepCopyObject copies through JSON: the object is small and copied only by client
// machinery (watch caches agora does not use).
func (l *sandboxList) DeepCopyObject() runtime.Object { return jsonCopy(l) }

func jsonCopy[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kubernetes: copy %T: %v", v, err)) // a type of this file that does not marshal
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("kubernetes: copy %T: %v", v, err))
	}
	return out
}

// addAgentsToScheme registers the Sandbox types and meta/v1's options under their group.
func addAgentsToScheme(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(agentsGroupVersion.WithKind("Sandbox"), &sandboxObject{})
	s.AddKnownTypeWithName(agentsGroupVersion.WithKind("SandboxList"), &sandboxList{})
	metav1.AddToGroupVersion(s, agentsGroupVersion)
	return nil
}

// sandboxOf wraps the dispatch's Job's pod (the same spec, labels and limits) in a Sandbox.
// The Job's activeDeadlineSeconds moves onto the pod: nothing else times a Sandbox's pod out.
func (p *Provider) sandboxOf(in jobInput) *sandboxObject {
	job := p.jobObject(in)
	pod := job.Spec.Template.Spec
	pod.ActiveDeadlineSeconds = job.Spec.ActiveDeadlineSeconds
	return &sandboxObject{
		TypeMeta:   metav1.TypeMeta{APIVersion: agentsGroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: in.name, Namespace: p.ns, Labels: labels(in.id)},
		Spec: sandboxSpec{
			PodTemplate: sandboxPodTemplate{
				Metadata: sandboxPodMetadata{Labels: job.Spec.Template.Labels, Annotations: job.Spec.Template.Annotations},
				Spec:     pod,
			},
			Service: ptrTo(false),
		},
	}
}
