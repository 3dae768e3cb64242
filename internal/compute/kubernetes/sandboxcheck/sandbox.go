// Package sandboxcheck holds agent-sandbox's Sandbox as agora reads it and the rules a
// dispatch's pod must obey before agora creates or adopts one (a Sandbox's pod template, or a
// warm pool's pod). It takes plain values (the target's images, limits and labels in Want), so
// its fuzz target builds without client-go.
package sandboxcheck

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Sandbox is agent-sandbox's Sandbox (agents.x-k8s.io/v1beta1), the fields agora sets
// and reads. Decoded from the apiserver's JSON: unknown fields are dropped, which is fine for
// what agora reads (status conditions) and never written back (agora only patches metadata).
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

// Spec is a Sandbox's spec.
type Spec struct {
	PodTemplate PodTemplate `json:"podTemplate"`
	// Service is whether the controller makes a Service for the pod: always false here.
	Service *bool `json:"service,omitempty"`
}

// PodTemplate is a Sandbox's (or a SandboxTemplate's) pod.
type PodTemplate struct {
	Metadata PodMetadata    `json:"metadata"`
	Spec     corev1.PodSpec `json:"spec"`
}

// PodMetadata is the metadata a pod template may set.
type PodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Status is what agora reads of a Sandbox's status.
type Status struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	NodeName   string             `json:"nodeName,omitempty"`
}

// DeepCopyObject copies through JSON: the object is small and copied only by client
// machinery (watch caches agora does not use).
func (s *Sandbox) DeepCopyObject() runtime.Object {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("sandboxcheck: copy a Sandbox: %v", err)) // a type of this file that does not marshal
	}
	out := new(Sandbox)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("sandboxcheck: copy a Sandbox: %v", err))
	}
	return out
}
