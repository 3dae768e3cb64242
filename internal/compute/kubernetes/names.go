package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Labels every object of the provider carries. Cancel and Sweep act only on objects with both.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "agora"
	labelDispatch  = "agora.dispatch"
	// annotationCancelled marks a Job agora deleted on purpose, so a Wait watching it
	// reports Cancelled rather than Lost.
	annotationCancelled = "agora.dev/cancelled"
)

// taskIDPrefix starts every task id of this provider: k8s:<namespace>/<job>.
const taskIDPrefix = "k8s:"

// ErrBadTaskID means a task id is not one this provider produced.
var ErrBadTaskID = errors.New("malformed kubernetes task id")

// maxName is a DNS label's length, the bound for a Job's name (its pods carry it in a label).
const maxName = 63

// checkDispatchID accepts ids that are valid label values (agora's are ULIDs): at most 63
// characters of [A-Za-z0-9._-], starting and ending alphanumeric.
func checkDispatchID(id string) error {
	if id == "" || len(id) > maxName {
		return fmt.Errorf("dispatch id %q: want 1 to %d characters", id, maxName)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == len(id)-1) {
			return fmt.Errorf("dispatch id %q: not a Kubernetes label value ([A-Za-z0-9._-], alphanumeric at both ends)", id)
		}
	}
	return nil
}

// objectName is the name of a dispatch's Job, Secret and NetworkPolicy: agora-<id> in
// lowercase. Lowercasing is one-to-one only when the id has no lowercase letter of its own
// (a ULID); otherwise, or when '_' or '.' had to become '-', or the name would pass 63
// characters, a hash of the id keeps distinct ids apart. The dispatch label, checked on
// adoption, is the guarantee; the name only keeps collisions out of the way.
func objectName(id string) string {
	var b strings.Builder
	exact := true
	hasLower := strings.ContainsAny(id, "abcdefghijklmnopqrstuvwxyz")
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'A' <= c && c <= 'Z':
			exact = exact && !hasLower
			b.WriteByte(c + 'a' - 'A')
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
			b.WriteByte(c)
		default:
			exact = false
			b.WriteByte('-')
		}
	}
	name := "agora-" + b.String()
	if exact && len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "-" + hex.EncodeToString(sum[:6])
	name = strings.TrimRight(name[:min(len(name), maxName-len(suffix))], "-")
	return name + suffix
}

// formatTaskID is the task id of Job name in namespace ns.
func formatTaskID(ns, name string) string { return taskIDPrefix + ns + "/" + name }

// parseTaskID splits "k8s:<namespace>/<job>", each part a DNS label.
func parseTaskID(s string) (ns, name string, err error) {
	rest, ok := strings.CutPrefix(s, taskIDPrefix)
	if !ok {
		return "", "", fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	ns, name, ok = strings.Cut(rest, "/")
	if !ok || !isDNSLabel(ns) || !isDNSLabel(name) {
		return "", "", fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	return ns, name, nil
}

// isDNSLabel reports whether s is an RFC 1123 label: [a-z0-9-], at most 63, alphanumeric at
// both ends.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > maxName || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// labels are the labels of every object of dispatch id.
func labels(id string) map[string]string {
	return map[string]string{labelManagedBy: managedBy, labelDispatch: id}
}

// ownedBy reports whether an object's labels say agora made it for dispatch id.
func ownedBy(l map[string]string, id string) bool {
	return l[labelManagedBy] == managedBy && l[labelDispatch] == id && id != ""
}
