package imageref

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	for _, ok := range []string{"busybox" + digest, "reg.example:5000/a/b:tag" + digest} {
		if err := Check("image", ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"busybox", "busybox:latest", "busybox@sha256:abc", digest, "busybox@sha512:" + strings.Repeat("ab", 32),
		"busybox@sha256:" + strings.Repeat("AB", 32), "bu sybox" + digest, "a@b" + digest} {
		err := Check("image", bad)
		if err == nil {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
	if err := Check("image", "busybox:1.36"); err == nil || !strings.Contains(err.Error(), "not pinned by digest; want REF@sha256:<64 hex>") {
		t.Errorf("tag error = %v", err)
	}
}

func FuzzCheckImage(f *testing.F) {
	f.Add("busybox@sha256:" + strings.Repeat("0", 64))
	f.Add("busybox:latest")
	f.Fuzz(func(t *testing.T, ref string) {
		if Check("image", ref) != nil {
			return
		}
		name, dgst, _ := strings.Cut(ref, "@")
		if name == "" || len(dgst) != len("sha256:")+64 || strings.ContainsAny(ref, " \t\n") {
			t.Errorf("checkImage accepted %q", ref)
		}
	})
}
