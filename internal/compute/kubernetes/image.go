package kubernetes

import "github.com/agora-dev/agora/internal/compute/kubernetes/imageref"

// checkImage accepts only an image reference pinned by digest ([imageref.Check]).
func checkImage(field, ref string) error { return imageref.Check(field, ref) }
