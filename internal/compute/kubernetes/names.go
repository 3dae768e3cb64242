package kubernetes

import "github.com/agora-dev/agora/internal/compute/kubernetes/k8sname"

// Labels every object of the provider carries. Cancel and Sweep act only on objects with both.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "agora"
	labelDispatch  = "agora.dispatch"
	// annotationCancelled marks a Job agora deleted on purpose, so a Wait watching it
	// reports Cancelled rather than Lost.
	annotationCancelled = "agora.dev/cancelled"
)

// taskIDPrefix starts every task id of this provider: k8s:<namespace>/<job>.
const taskIDPrefix = k8sname.TaskIDPrefix

// ErrBadTaskID means a task id is not one this provider produced.
var ErrBadTaskID = k8sname.ErrBadTaskID

// maxName is a DNS label's length, the bound for a Job's name (its pods carry it in a label).
const maxName = k8sname.MaxName

// The names of this provider's objects and task ids are k8sname's, a leaf its fuzz targets
// build alone.

func checkDispatchID(id string) error                   { return k8sname.CheckDispatchID(id) }
func objectName(id string) string                       { return k8sname.ObjectName(id) }
func formatTaskID(ns, name string) string               { return k8sname.FormatTaskID(ns, name) }
func parseTaskID(s string) (ns, name string, err error) { return k8sname.ParseTaskID(s) }
func isDNSLabel(s string) bool                          { return k8sname.IsDNSLabel(s) }
func isDNSSubdomain(s string) bool                      { return k8sname.IsDNSSubdomain(s) }

// labels are the labels of every object of dispatch id.
func labels(id string) map[string]string {
	return map[string]string{labelManagedBy: managedBy, labelDispatch: id}
}

// ownedBy reports whether an object's labels say agora made it for dispatch id.
func ownedBy(l map[string]string, id string) bool {
	return l[labelManagedBy] == managedBy && l[labelDispatch] == id && id != ""
}
