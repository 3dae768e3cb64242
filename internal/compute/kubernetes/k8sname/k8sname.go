// Package k8sname holds the kubernetes provider's names: a dispatch's object name, its task id
// ("k8s:<namespace>/<job>"), the DNS labels and subdomains Kubernetes names are, and the
// image pull Secrets a target may name. It runs on the host, over ids and config values and
// task ids read back from agora.db; it imports only the standard library, and lives apart
// from the provider (which links client-go) so its fuzz targets build without the provider's
// import graph.
package k8sname

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// TaskIDPrefix starts every task id of the kubernetes provider: k8s:<namespace>/<job>.
const TaskIDPrefix = "k8s:"

// ErrBadTaskID means a task id is not one the kubernetes provider produced.
var ErrBadTaskID = errors.New("malformed kubernetes task id")

// MaxName is a DNS label's length, the bound for a Job's name (its pods carry it in a label).
const MaxName = 63

// CheckDispatchID accepts ids that are valid label values (agora's are ULIDs): at most 63
// characters of [A-Za-z0-9._-], starting and ending alphanumeric.
func CheckDispatchID(id string) error {
	if id == "" || len(id) > MaxName {
		return fmt.Errorf("dispatch id %q: want 1 to %d characters", id, MaxName)
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

// ObjectName is the name of a dispatch's Job, Secret and NetworkPolicy: agora-<id> in
// lowercase. Lowercasing is one-to-one only when the id has no lowercase letter of its own
// (a ULID); otherwise, or when '_' or '.' had to become '-', or the name would pass 63
// characters, a hash of the id keeps distinct ids apart. The dispatch label, checked on
// adoption, is the guarantee; the name only keeps collisions out of the way.
func ObjectName(id string) string {
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
	if exact && len(name) <= MaxName {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "-" + hex.EncodeToString(sum[:6])
	name = strings.TrimRight(name[:min(len(name), MaxName-len(suffix))], "-")
	return name + suffix
}

// FormatTaskID is the task id of Job name in namespace ns.
func FormatTaskID(ns, name string) string { return TaskIDPrefix + ns + "/" + name }

// ParseTaskID splits "k8s:<namespace>/<job>", each part a DNS label.
func ParseTaskID(s string) (ns, name string, err error) {
	rest, ok := strings.CutPrefix(s, TaskIDPrefix)
	if !ok {
		return "", "", fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	ns, name, ok = strings.Cut(rest, "/")
	if !ok || !IsDNSLabel(ns) || !IsDNSLabel(name) {
		return "", "", fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	return ns, name, nil
}

// IsDNSLabel reports whether s is an RFC 1123 label: [a-z0-9-], at most 63, alphanumeric at
// both ends.
func IsDNSLabel(s string) bool {
	if s == "" || len(s) > MaxName || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// IsDNSSubdomain reports whether s is an RFC 1123 subdomain (labels joined by dots, at most
// 253).
func IsDNSSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !IsDNSLabel(l) {
			return false
		}
	}
	return true
}
