package k8stest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// applyResources maps the kinds agora's manifests hold (deploy/kubernetes, the Helm chart) to
// their resource names and whether they live in a namespace. A kind not here is refused by
// Apply, saying which.
var applyResources = map[string]struct {
	resource   string
	namespaced bool
}{
	"Namespace":             {"namespaces", false},
	"PersistentVolume":      {"persistentvolumes", false},
	"ServiceAccount":        {"serviceaccounts", true},
	"ConfigMap":             {"configmaps", true},
	"Secret":                {"secrets", true},
	"Service":               {"services", true},
	"PersistentVolumeClaim": {"persistentvolumeclaims", true},
	"Role":                  {"roles", true},
	"RoleBinding":           {"rolebindings", true},
	"NetworkPolicy":         {"networkpolicies", true},
	"Deployment":            {"deployments", true},
	"StatefulSet":           {"statefulsets", true},
	"Job":                   {"jobs", true},
	"Lease":                 {"leases", true},
}

// Apply creates or updates obj (a manifest's object: apiVersion, kind, metadata.name and, for
// a namespaced kind, metadata.namespace) with server-side apply, as `kubectl apply
// --server-side` does: the apiserver merges it, so applying a file twice changes nothing.
func (c *Cluster) Apply(ctx context.Context, obj map[string]any) error {
	path, err := objectPath(obj)
	if err != nil {
		return err
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("apply %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, c.Server+path+"?fieldManager=k8stest&force=true", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("apply %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/apply-patch+yaml") // JSON is YAML
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("apply %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var st struct{ Reason, Message string }
		if json.Unmarshal(b, &st) != nil || st.Message == "" {
			st.Message = string(b)
		}
		return &StatusError{Method: "APPLY", Path: path, Code: resp.StatusCode, Reason: st.Reason, Message: st.Message}
	}
	return nil
}

// objectPath is the API path of obj: /api/v1/... for the core group, /apis/GROUP/VERSION/...
// for the others.
func objectPath(obj map[string]any) (string, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	r, ok := applyResources[kind]
	if !ok {
		return "", fmt.Errorf("apply: kind %q is not one Apply knows", kind)
	}
	if apiVersion == "" || name == "" || (r.namespaced && ns == "") {
		return "", fmt.Errorf("apply %s %q: want apiVersion, metadata.name and (namespaced) metadata.namespace", kind, name)
	}
	p := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		p = "/api/" + apiVersion
	}
	if r.namespaced {
		p += "/namespaces/" + url.PathEscape(ns)
	}
	return p + "/" + r.resource + "/" + url.PathEscape(name), nil
}
