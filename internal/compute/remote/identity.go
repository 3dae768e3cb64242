package remote

import (
	"cmp"
	"strings"
)

// Identity is the version a remote worker and the host that dispatches to it compare before
// the worker fetches anything (Info.Version). A release's module version stands as it is. A
// build that has none ("(devel)": go build -buildvcs=false, a tree without .git) or was built
// from a modified tree ("+dirty") adds the sha256 of the worker program's bytes: otherwise a
// stale image of such a build passes as "dev" == "dev". An empty digest (the host had
// no worker program to read) is "unknown", which no worker's identity equals.
func Identity(moduleVersion, workerSHA256 string) string {
	if !NeedsDigest(moduleVersion) {
		return moduleVersion
	}
	v := moduleVersion
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	workerSHA256 = cmp.Or(workerSHA256, "unknown")
	return v + "+sha256:" + workerSHA256
}

// NeedsDigest reports whether a module version alone does not name what was built: none, or
// a modified tree's.
func NeedsDigest(moduleVersion string) bool {
	return moduleVersion == "" || moduleVersion == "(devel)" || moduleVersion == "dev" ||
		strings.HasSuffix(moduleVersion, "+dirty")
}
