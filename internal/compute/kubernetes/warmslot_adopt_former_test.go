package kubernetes

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// SlotAdoption.Former: a claimed slot Job labelled with a former identity of the
// home (what an older agora computed) is adopted as the home's; a label that is neither the
// home's nor a former one of it is another home's and refused, and an invalid former label is
// refused before anything is looked up.
func TestCheckClaimedSlotJob_FormerHome(t *testing.T) {
	const slot = "s0123456789abcdef0123456789abcdef"
	const id = "DISPATCH1"
	job := func(home string) *batchv1.Job {
		l := labels(slot)
		l[labelSlot], l[labelHome] = slot, home
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: objectName(slot), Labels: l,
			Annotations: map[string]string{annotationClaimed: id, annotationClaimedPod: "pod-uid"}}}
		j.Spec.Template.Labels = labels(slot)
		j.Spec.Template.Labels[labelSlot] = slot
		return j
	}
	s := compute.Spec{ID: id}
	a := SlotAdoption{Home: "newhome", Former: []string{"oldhome"}}
	for _, h := range []string{"newhome", "oldhome"} {
		if err := checkClaimedSlotJob(job(h), slot, s, a); err != nil {
			t.Errorf("the home's slot labelled %s: %v; want adopted", h, err)
		}
	}
	if err := checkClaimedSlotJob(job("otherhome"), slot, s, a); err == nil || !strings.Contains(err.Error(), "another home's") {
		t.Errorf("another home's slot: %v; want refused as another home's", err)
	}
	if err := checkClaimedSlotJob(job("oldhome"), slot, s, SlotAdoption{Home: "newhome"}); err == nil {
		t.Error("a former label adopted with no former identity given")
	}
	p := &Provider{ns: "agents"}
	if _, err := p.AdoptSlot(t.Context(), s, SlotAdoption{TaskID: formatTaskID("agents", objectName(slot)), Home: "newhome", Former: []string{"Not/Valid"}}); err == nil || !strings.Contains(err.Error(), "Not/Valid") {
		t.Errorf("AdoptSlot with an invalid former identity: %v; want refused", err)
	}
}
