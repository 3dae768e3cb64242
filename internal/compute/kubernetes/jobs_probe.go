package kubernetes

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProbeJobs asks a jobs-backend target's cluster the one question every dispatch needs
// answered, so doctor's "config ok" means the cluster was asked: may agora's
// account list its Jobs in the namespace, with the Role in docs/providers-k8s.md? It returns
// how many of agora's Jobs are there (running dispatches, slots, or ended and not yet
// deleted).
func ProbeJobs(ctx context.Context, kubeconfig, kubeContext, namespace string) (int, error) {
	c, server, err := probeClient(kubeconfig, kubeContext)
	if err != nil {
		return 0, err
	}
	return probeJobs(ctx, c, server, namespace)
}

// probeClient is doctor's client for a target's cluster, with the target's own credentials,
// and the API server's address as doctor may print it.
func probeClient(kubeconfig, kubeContext string) (clusterAPI, string, error) {
	cfg, err := restConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, "", err
	}
	c, err := newRESTCluster(cfg)
	if err != nil {
		return nil, "", err
	}
	return c, redactedHost(cfg.Host), nil
}

// redactedHost is the API server's URL as doctor may print it: a password in it (which Go's
// client sends as basic auth) as ***, as net/http's own errors print it.
func redactedHost(host string) string {
	u, err := url.Parse(host)
	if err != nil {
		if strings.Contains(host, "@") {
			return "(the kubeconfig's server, unparsed)"
		}
		return host
	}
	return u.Redacted()
}

func probeJobs(ctx context.Context, c clusterAPI, server, namespace string) (int, error) {
	l, err := c.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return 0, fmt.Errorf("the API server at %s refuses agora's account: it may not list jobs in namespace %q (the Role in docs/providers-k8s.md grants it): %w", server, namespace, err)
	case err != nil:
		return 0, fmt.Errorf("the API server at %s: list jobs in namespace %q: %w", server, namespace, err)
	}
	return len(l.Items), nil
}
