package k8stest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// yamlKinds are the collections ApplyYAML creates into, by kind: what agora's documentation
// tells people to apply in the namespace agora dispatches into.
var yamlKinds = map[string]string{
	"ServiceAccount": "/api/v1/namespaces/%s/serviceaccounts",
	"Role":           "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles",
	"RoleBinding":    "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings",
	"NetworkPolicy":  "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies",
	// Cluster-wide: the TokenReview grant of agent-sandbox pools (examples/kubernetes/rbac-pool.yaml).
	"ClusterRole":        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
	"ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}

// ApplyYAML creates, as the admin, each object of docs (YAML documents separated by "---"
// lines) in the cluster's namespace, the way `kubectl create -f` would: the apiserver decodes
// the YAML itself, and refuses a document whose namespace is not the cluster's. Only the
// kinds of yamlKinds are known; a document of another kind is an error, so a file the docs
// hand people cannot hold something the test does not apply.
func (c *Cluster) ApplyYAML(ctx context.Context, docs []byte) error {
	for i, doc := range splitYAML(docs) {
		kind := yamlField(doc, "kind")
		path, ok := yamlKinds[kind]
		if !ok {
			return fmt.Errorf("document %d: kind %q is not one ApplyYAML knows", i+1, kind)
		}
		if strings.Contains(path, "%s") {
			path = fmt.Sprintf(path, c.Namespace)
		}
		if err := c.doRaw(ctx, http.MethodPost, path, "application/yaml", []byte(doc), nil); err != nil {
			return fmt.Errorf("document %d (%s): %w", i+1, kind, err)
		}
	}
	return nil
}

// splitYAML splits a YAML stream at its "---" lines and drops documents that hold nothing but
// comments and blank lines.
func splitYAML(b []byte) []string {
	var out []string
	for _, doc := range strings.Split("\n"+string(b), "\n---") {
		doc = strings.TrimPrefix(doc, "\n")
		empty := true
		for _, line := range strings.Split(doc, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
			}
		}
		if !empty {
			out = append(out, doc)
		}
	}
	return out
}

// yamlField is the value of a top-level "key: value" line of doc ("" when none).
func yamlField(doc, key string) string {
	for _, line := range strings.Split(doc, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			v, _, _ = strings.Cut(v, "#")
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ServiceAccountKubeconfig writes a kubeconfig (0600, in the cluster's directory) that
// authenticates as ServiceAccount name of the cluster's namespace, with a token the apiserver
// issues for it (TokenRequest, valid an hour): a client with exactly the rights the account
// is bound to. The account must exist.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, name string) (string, error) {
	req := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"expirationSeconds": 3600}}
	var resp struct {
		Status struct{ Token string } `json:"status"`
	}
	path := fmt.Sprintf("/api/v1/namespaces/%s/serviceaccounts/%s/token", c.Namespace, name)
	if err := c.Do(ctx, http.MethodPost, path, req, &resp); err != nil {
		return "", err
	}
	if resp.Status.Token == "" {
		return "", fmt.Errorf("POST %s: no token in the answer", path)
	}
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		return "", err
	}
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters": []map[string]any{{"name": "k8stest", "cluster": map[string]any{
			"server": c.Server, "certificate-authority-data": ca}}},
		"users":           []map[string]any{{"name": name, "user": map[string]any{"token": resp.Status.Token}}},
		"contexts":        []map[string]any{{"name": "k8stest", "context": map[string]any{"cluster": "k8stest", "user": name, "namespace": c.Namespace}}},
		"current-context": "k8stest",
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	out := filepath.Join(c.Dir, "sa-"+name+".kubeconfig")
	if err := replaceFile(out, b); err != nil {
		return "", err
	}
	return out, nil
}

// doRaw is Do with a body of its own content type.
func (c *Cluster) doRaw(ctx context.Context, method, path, contentType string, body []byte, out *[]byte) error {
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", contentType)
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var st struct{ Reason, Message string }
		if json.Unmarshal(b, &st) != nil || st.Message == "" {
			st.Message = string(b)
		}
		return &StatusError{Method: method, Path: path, Code: resp.StatusCode, Reason: st.Reason, Message: st.Message}
	}
	if out != nil {
		*out = b
	}
	return nil
}
