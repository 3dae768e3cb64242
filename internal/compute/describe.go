package compute

import "context"

// Placement is where a dispatch's process runs as its provider sees it now: what `agora
// dispatch describe` shows beside the record. Every field is the provider's own view (a pod
// phase, a container state), never the agent's output.
type Placement struct {
	Provider string `json:"provider"`
	// Gone reports that the provider holds nothing for the task any more: the Job was deleted
	// (its TTL after finishing, a cancel, someone else) or the container removed.
	Gone bool `json:"gone,omitempty"`
	// Object is the provider's name for the task: the Job, the container.
	Object string `json:"object,omitempty"`
	// Conditions are the object's true conditions with their reasons ("Failed: DeadlineExceeded").
	Conditions []string `json:"conditions,omitempty"`
	// Pod is the newest pod of a Job.
	Pod string `json:"pod,omitempty"`
	// Phase is the pod's phase (Pending, Running, Succeeded, Failed, Unknown) or the
	// container's state (created, running, exited).
	Phase string `json:"phase,omitempty"`
	// Node is the node the pod was scheduled on.
	Node string `json:"node,omitempty"`
	// Reason says why the task is where it is, when the provider says (ErrImagePull,
	// OOMKilled).
	Reason string `json:"reason,omitempty"`
	// Health is a container's health check status, when it has one.
	Health string `json:"health,omitempty"`
}

// Describer is an optional interface of a [Provider] that can say where a task runs, found by
// type assertion. Describe MUST NOT change anything, and MUST answer a task whose object is
// gone with Placement.Gone, not an error.
type Describer interface {
	Describe(ctx context.Context, taskID string) (Placement, error)
}
