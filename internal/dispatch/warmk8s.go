package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// k8sHomeKeyFile is home.AuditPubFile (a test pins the two equal): random per home, made by
// agora init, public.
const k8sHomeKeyFile = "keys/audit.pub"

// k8sHomeIDs are a home's identities on its Kubernetes objects.
type k8sHomeIDs struct {
	// current labels what this agora makes, sweeps and adopts.
	current string
	// former are the labels an older agora gave this home's objects on this host, swept and
	// adopted as current's (never made): at most one, none when it is current.
	former []string
}

// k8sHomes computes this home's Kubernetes identities.
//
// The identity is the home's audit public key (keys/audit.pub) alone, hashed. It must be the
// same for every replica of one home and differ between homes (so homes sharing a namespace
// never sweep or adopt each other's pools):
//   - The key is random per home (agora init) and goes wherever the home goes: a standby that
//     restores the home from object storage runs with the home's own keys (the operator's
//     keys Secret), so the leader it replaces had the same identity, and it adopts the dead
//     pods the dead leader's supervisors claimed and sweeps what its pools left.
//   - The host name is not in it: each replica runs on a pod of its own name, and a home moved
//     to another machine is the same home. The path is not in it either: a home restored or
//     moved to another path is still that home, and two homes at one path are told apart by
//     their keys anyway (two homes on hosts of one name at one path).
//   - What the key does not tell apart is a copy of one home (its keys copied with it): the
//     copy is the same home by every measure agora has (its audit chain signs with that key,
//     its replica segments name it), and like the home's databases it must not run beside the
//     original (HA runs one leader, by its Lease): two copies at once would sweep each other's
//     pools' policies.
//
// An older agora hashed the host name, the path and the key file's bytes (former): a pool
// made before an upgrade carries that, and is swept and adopted as this home's on the same
// host and path. A home with no key file (one made by hand, a test's) keeps that identity,
// with no key, as before: it has nothing else to be told apart by.
//
// A key file that is there but cannot be read (its permissions, a directory at its path, an
// I/O error) is an error, never that fallback: the home would take another identity for as
// long as the file stays unreadable, and then sweep none of its own pools, adopt none of its
// claimed pool pods, and make objects a readable key's replica would not know.
func (d *Dispatcher) k8sHomes() (k8sHomeIDs, error) {
	dir := filepath.Dir(d.StateDir)
	path := filepath.Join(dir, k8sHomeKeyFile)
	key, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		// err names the file (a *PathError).
		return k8sHomeIDs{}, fmt.Errorf("this home's identity on Kubernetes is its public audit key (%s, made by agora init), which cannot be read: %w; "+
			"make it a readable file again: without it agora would take this home's warm pools for another home's", k8sHomeKeyFile, err)
	}
	former := hostPathK8sHome(d.hostname(), dir, key)
	pub := strings.TrimSpace(string(key)) // the key's text, however the file's lines end
	if pub == "" {
		return k8sHomeIDs{current: former}, nil
	}
	sum := sha256.Sum256([]byte("agora k8s home\x00" + pub))
	return k8sHomeIDs{current: hex.EncodeToString(sum[:10]), former: []string{former}}, nil
}

// hostPathK8sHome is the identity agora gave a home's Kubernetes objects before its audit key
// alone was (host, AGORA_HOME and the key file's bytes): kept to sweep and adopt what an older
// agora of this home made.
func hostPathK8sHome(host, dir string, key []byte) string {
	sum := sha256.Sum256([]byte(host + "\x00" + dir + "\x00" + string(key)))
	return hex.EncodeToString(sum[:10])
}

// hostname is this machine's name, or the test's (testOnlyHostname): the former identity's.
func (d *Dispatcher) hostname() string {
	if d.testOnlyHostname != "" {
		return d.testOnlyHostname
	}
	host, _ := os.Hostname()
	return host
}
