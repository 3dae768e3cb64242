package k8stest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// writeKubeconfig writes a kubeconfig for one identity. JSON is YAML, so every Kubernetes
// client reads it, and the certificates are embedded, so the file alone is enough to connect
// (a caller may copy it anywhere). The file is 0600: it holds a private key.
func writeKubeconfig(dir, name, server string, caPEM []byte, id *identity, namespace string) (string, error) {
	type cluster struct {
		Server string `json:"server"`
		CAData []byte `json:"certificate-authority-data"`
	}
	type user struct {
		CertData []byte `json:"client-certificate-data"`
		KeyData  []byte `json:"client-key-data"`
	}
	type context struct {
		Cluster   string `json:"cluster"`
		User      string `json:"user"`
		Namespace string `json:"namespace,omitempty"`
	}
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []map[string]any{{"name": "k8stest", "cluster": cluster{server, caPEM}}},
		"users":           []map[string]any{{"name": name, "user": user{id.certPEM, id.keyPEM}}},
		"contexts":        []map[string]any{{"name": "k8stest", "context": context{"k8stest", name, namespace}}},
		"current-context": "k8stest",
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode kubeconfig for %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := replaceFile(path, b); err != nil {
		return "", fmt.Errorf("write kubeconfig for %s: %w", name, err)
	}
	return path, nil
}
