package k8stest

import (
	"reflect"
	"strings"
	"testing"
)

const importDigest = "sha256:f86fe78b20753ef23998583ec7bb149dfdf6f288397ce66fb035f93fc056b4f9"

// What ctr 1.6 prints for a docker-archive and an OCI layout, and what must not be pinned.
func TestImportedImages(t *testing.T) {
	out := "unpacking localhost/agora-worker:5611443-dirty (" + importDigest + ")...done\n" +
		"unpacking k8stest.invalid/probe:1 (" + importDigest + ")...done\n" +
		// a port is not a tag; a digest name, an ID and a bad digest have nothing to pin
		"unpacking localhost:5000/x (" + importDigest + ")...done\n" +
		"unpacking localhost/x@" + importDigest + " (" + importDigest + ")...done\n" +
		"unpacking sha256:2d61 (" + importDigest + ")...done\n" +
		"unpacking a/b:1 (sha256:XYZ)...done\n" +
		"ctr: something else\n"
	got := importedImages([]byte(out))
	want := []importedImage{
		{"localhost/agora-worker:5611443-dirty", "localhost/agora-worker", importDigest},
		{"k8stest.invalid/probe:1", "k8stest.invalid/probe", importDigest},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("importedImages:\n got %+v\nwant %+v", got, want)
	}
}

// FuzzImportedImages: whatever ctr prints, every result is REPO:TAG with a sha256 digest and
// the pinned reference has no second @ or whitespace.
func FuzzImportedImages(f *testing.F) {
	f.Add([]byte("unpacking a/b:1 (" + importDigest + ")...done\n"))
	f.Add([]byte("unpacking  (" + importDigest + ")\nunpacking a:b ("))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, im := range importedImages(b) {
			ref := im.repo + "@" + im.digest
			if !isDigest(im.digest) || im.repo == "" || strings.Count(ref, "@") != 1 ||
				strings.ContainsAny(ref, " \t\n") || !strings.HasPrefix(im.name, im.repo+":") {
				t.Fatalf("bad import %+v from %q", im, b)
			}
		}
	})
}
