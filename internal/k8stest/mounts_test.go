package k8stest

import (
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
	got := mountPoints([]byte(info))
	want := []string{"/", "/dev/shm", "/dev/shm/agora-k8stest-1-2/containerd/root/x y/rootfs"}
	if !slices.Equal(got, want) {
		t.Fatalf("mountPoints = %q, want %q", got, want)
	}
}

func FuzzMountPoints(f *testing.F) {
	f.Add([]byte("22 1 254:0 / / rw - ext4 /dev/vda rw\n"))
	f.Add([]byte(`1 2 3 4 /a\040b\ 5` + "\n" + `x x x x /\777\0`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mp := range mountPoints(b) {
			if !strings.HasPrefix(mp, "/") {
				t.Fatalf("mount point %q is not absolute", mp)
			}
		}
	})
}
