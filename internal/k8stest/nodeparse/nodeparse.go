// Package nodeparse reads what the real node's tools print for k8stest (tests only): a
// /proc mountinfo's mount points, an nft set listing's elements and ctr's import lines. It
// imports only the standard library and lives apart from k8stest (which links client-go and
// builds a control plane) so its fuzz targets build without k8stest's import graph.
package nodeparse

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// MountPoints returns the mount point of each line of a /proc/<pid>/mountinfo: the fifth
// field, with the kernel's octal escapes (\040 for a space) undone. Malformed lines are skipped.
func MountPoints(mountinfo []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[4], "/") {
			continue
		}
		out = append(out, unescapeOctal(f[4]))
	}
	return out
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// SetHolds reports whether nft's listing of a set (`nft list set ...`) holds element ip: its
// "elements = { a, b,\n c }" part, absent when the set is empty.
func SetHolds(listing, ip string) bool {
	_, elems, ok := strings.Cut(listing, "elements = {")
	if !ok {
		return false
	}
	elems, _, _ = strings.Cut(elems, "}")
	for _, e := range strings.FieldsFunc(elems, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		if e == ip {
			return true
		}
	}
	return false
}

// Image is an image ctr imported: NAME (REPO:TAG) and the digest containerd holds for it.
type Image struct{ Name, Repo, Digest string }

// ImportedImages reads ctr's "unpacking NAME (sha256:HEX)...done" lines. A NAME without a
// tag (an image ID, a digest name) yields nothing: it has no repository to pin.
func ImportedImages(out []byte) []Image {
	var ims []Image
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "unpacking ")
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(rest, " (")
		if !ok {
			continue
		}
		digest, _, ok := strings.Cut(rest, ")")
		if !ok || !IsDigest(digest) || strings.ContainsAny(name, "@ \t") || strings.HasPrefix(name, "sha256:") {
			continue
		}
		i := strings.LastIndexByte(name, ':')
		if i <= 0 || i <= strings.LastIndexByte(name, '/') || i == len(name)-1 {
			continue
		}
		ims = append(ims, Image{Name: name, Repo: name[:i], Digest: digest})
	}
	return ims
}

// IsDigest reports whether s is sha256:<64 lowercase hex>.
func IsDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, r := range hex {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
