package sandboxcheck

import (
	"errors"
	"fmt"
	"maps"
)

// Want is what the provider wants of a dispatch's Sandbox: the labels its NetworkPolicy
// selects, the pod template's labels exactly, and the rules of its pod.
type Want struct {
	Selected map[string]string // the labels the dispatch's NetworkPolicy selects
	Labels   map[string]string // the pod template's labels, exactly
	Pod      Pod
}

// Check refuses a Sandbox whose settings would weaken what a Job dispatch's pod has: it runs
// before agora creates one (a bug in the builder fails closed) and before agora adopts one it
// finds (whoever may patch Sandboxes in the namespace could have edited its pod template:
// host namespaces, a privileged container, a hostPath volume, a Service, another image). It
// checks rules, not equality: an adopted Sandbox's mounts are not known again.
func Check(sb *Sandbox, w Want) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if sb.Spec.Service == nil || *sb.Spec.Service {
		bad("spec.service is not false: the controller would make a Service reaching the pod")
	}
	if !carries(sb.Spec.PodTemplate.Metadata.Labels, w.Selected) {
		bad("the pod template does not carry the labels the dispatch's NetworkPolicy selects")
	} else if !maps.Equal(sb.Spec.PodTemplate.Metadata.Labels, w.Labels) {
		// Another NetworkPolicy of the namespace may select an extra label: policies add up.
		bad("the pod template's labels %v are not the dispatch's %v", sb.Spec.PodTemplate.Metadata.Labels, w.Labels)
	}
	CheckPod(w.Pod, sb.Spec.PodTemplate.Metadata.Annotations, &sb.Spec.PodTemplate.Spec, bad)
	if len(errs) > 0 {
		return fmt.Errorf("sandbox %q would weaken the dispatch's isolation: %w", sb.Name, errors.Join(errs...))
	}
	return nil
}

// carries reports whether l has every label of sel, none of them empty (a selector of an
// empty dispatch id selects nothing agora made).
func carries(l, sel map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if v == "" || l[k] != v {
			return false
		}
	}
	return true
}

func derefOr[T any](p *T, zero T) T {
	if p == nil {
		return zero
	}
	return *p
}
