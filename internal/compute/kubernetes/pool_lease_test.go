package kubernetes

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestProvider_Lapsed: a pool's lease lapses only once the provider's sweeps have watched its
// template's uid and stamp unchanged for a whole lease on their own clock. What the stamp says
// (passed long ago, a thousand years on, no instant at all) never counts: a first sight is
// never lapsed, a changed stamp or a template made again starts the watch again.
func TestProvider_Lapsed(t *testing.T) {
	const lease = 10 * time.Second
	tmpl := func(uid, stamp string) *templateObject {
		o := &templateObject{}
		o.Name, o.UID = "agora-pool-0123456789abcdef", types.UID(uid)
		o.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
		o.Annotations = map[string]string{annotationHeldUntil: stamp}
		return o
	}
	t0 := time.Now()
	type sweep struct {
		after      time.Duration
		uid, stamp string
		want       bool
	}
	for _, tt := range []struct {
		name   string
		sweeps []sweep
	}{
		{"a stamp long passed, at first sight", []sweep{{0, "u", "2000-01-01T00:00:00Z", false}}},
		{"no instant, at first sight", []sweep{{0, "u", "not an instant", false}}},
		{"unchanged for a lease", []sweep{{0, "u", "2000-01-01T00:00:00Z", false}, {lease - time.Second, "u", "2000-01-01T00:00:00Z", false}, {lease, "u", "2000-01-01T00:00:00Z", true}}},
		{"a thousand years on, unchanged for a lease", []sweep{{0, "u", "3026-01-01T00:00:00Z", false}, {lease, "u", "3026-01-01T00:00:00Z", true}}},
		{"no stamp, unchanged for a lease", []sweep{{0, "u", "", false}, {lease, "u", "", true}}},
		{"renewed within each lease", []sweep{{0, "u", "a", false}, {lease - time.Second, "u", "b", false}, {2*lease - 2*time.Second, "u", "c", false}, {2*lease + time.Second, "u", "c", false}}},
		{"made again", []sweep{{0, "u", "a", false}, {lease, "v", "a", false}, {2 * lease, "v", "a", true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &Provider{testOnlyPoolLease: lease}
			for i, s := range tt.sweeps {
				seen := map[string]leaseSeen{}
				if got := p.lapsed(tmpl(s.uid, s.stamp), t0.Add(s.after), seen); got != s.want {
					t.Fatalf("sweep %d (%s on, uid %s, stamp %q): lapsed %v, want %v", i, s.after, s.uid, s.stamp, got, s.want)
				}
				p.leases = seen
			}
		})
	}
}
