package nodeparse

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMountPoints(t *testing.T) {
	info := `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:30 / /dev/shm rw,nosuid,nodev shared:2 - tmpfs tmpfs rw
90 35 0:45 / /dev/shm/agora-k8stest-1-2/containerd/root/x\040y/rootfs rw - overlay overlay rw,lowerdir=/a
bad line
91 35 0:46 / relative rw - tmpfs tmpfs rw
`
	got := MountPoints([]byte(info))
	want := []string{"/", "/dev/shm", "/dev/shm/agora-k8stest-1-2/containerd/root/x y/rootfs"}
	if !slices.Equal(got, want) {
		t.Fatalf("MountPoints = %q, want %q", got, want)
	}
}

func FuzzMountPoints(f *testing.F) {
	f.Add([]byte("22 1 254:0 / / rw - ext4 /dev/vda rw\n"))
	f.Add([]byte(`1 2 3 4 /a\040b\ 5` + "\n" + `x x x x /\777\0`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mp := range MountPoints(b) {
			if !strings.HasPrefix(mp, "/") {
				t.Fatalf("mount point %q is not absolute", mp)
			}
		}
	})
}

// An nft listing of the engine's set, as nft 1.0.6 prints it (one element per line past the
// line's width).
const podipsListing = `table inet kube-network-policies {
	set podips-v4 {
		type ipv4_addr
		elements = { 10.251.0.2, 10.251.0.4,
			     10.251.0.12 }
	}
}
`

func TestSetHolds(t *testing.T) {
	for _, tc := range []struct {
		listing, ip string
		want        bool
	}{
		{podipsListing, "10.251.0.2", true},
		{podipsListing, "10.251.0.12", true},
		{podipsListing, "10.251.0.1", false},   // a prefix of .12
		{podipsListing, "10.251.0.123", false}, // .12 is its prefix
		{"table inet kube-network-policies {\n\tset podips-v4 {\n\t\ttype ipv4_addr\n\t}\n}\n", "10.251.0.2", false},
		{"", "10.251.0.2", false},
	} {
		if got := SetHolds(tc.listing, tc.ip); got != tc.want {
			t.Errorf("SetHolds(%q) = %v, want %v", tc.ip, got, tc.want)
		}
	}
}

// FuzzSetHolds: any listing, no panic; an element the listing names is found.
func FuzzSetHolds(f *testing.F) {
	f.Add(podipsListing, "10.251.0.4")
	f.Add("elements = {", "")
	f.Add("elements = { }", "x")
	f.Fuzz(func(t *testing.T, listing, ip string) {
		got := SetHolds(listing, ip)
		if ip == "" && got {
			t.Fatal("an empty address is never an element")
		}
		if ip != "" && !strings.ContainsAny(ip, ", \n\t}") && SetHolds("elements = { "+ip+" }", ip) != true {
			t.Fatalf("the element %q is not found", ip)
		}
	})
}

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
	got := ImportedImages([]byte(out))
	want := []Image{
		{"localhost/agora-worker:5611443-dirty", "localhost/agora-worker", importDigest},
		{"k8stest.invalid/probe:1", "k8stest.invalid/probe", importDigest},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ImportedImages:\n got %+v\nwant %+v", got, want)
	}
}

// FuzzImportedImages: whatever ctr prints, every result is REPO:TAG with a sha256 digest and
// the pinned reference has no second @ or whitespace.
func FuzzImportedImages(f *testing.F) {
	f.Add([]byte("unpacking a/b:1 (" + importDigest + ")...done\n"))
	f.Add([]byte("unpacking  (" + importDigest + ")\nunpacking a:b ("))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, im := range ImportedImages(b) {
			ref := im.Repo + "@" + im.Digest
			if !IsDigest(im.Digest) || im.Repo == "" || strings.Count(ref, "@") != 1 ||
				strings.ContainsAny(ref, " \t\n") || !strings.HasPrefix(im.Name, im.Repo+":") {
				t.Fatalf("bad import %+v from %q", im, b)
			}
		}
	})
}
