package obs

import "github.com/agora-dev/agora/internal/obs/labelcap"

// labels caps the distinct values one label may take, and keeps them plain
// ([labelcap.Set]).
type labels = labelcap.Set

func newLabels(max int) *labels { return labelcap.New(max) }

// nameOf cuts a versioned catalog reference (name@sha256:HEX) to its name.
func nameOf(ref string) string {
	for i := 0; i < len(ref); i++ {
		if ref[i] == '@' {
			return ref[:i]
		}
	}
	return ref
}
