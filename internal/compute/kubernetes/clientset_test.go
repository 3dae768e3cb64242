package kubernetes

import (
	"k8s.io/client-go/kubernetes"
)

// clientsetAPI is clusterAPI over a client-go clientset: a test's fake (with its reactors), or
// a real clientset a test builds for an admin's view. Production builds its own client
// (newRESTCluster) so that cmd/agora does not link client-go's all-groups scheme.
func clientsetAPI(cs kubernetes.Interface) clusterAPI { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) CoreV1() coreAPI             { return clientsetCore{c.cs} }
func (c clientset) BatchV1() batchAPI           { return clientsetBatch{c.cs} }
func (c clientset) NetworkingV1() networkingAPI { return clientsetNetworking{c.cs} }

type (
	clientsetCore       struct{ cs kubernetes.Interface }
	clientsetBatch      struct{ cs kubernetes.Interface }
	clientsetNetworking struct{ cs kubernetes.Interface }
)

func (c clientsetCore) Pods(ns string) podsAPI       { return c.cs.CoreV1().Pods(ns) }
func (c clientsetCore) Secrets(ns string) secretsAPI { return c.cs.CoreV1().Secrets(ns) }
func (c clientsetCore) Nodes() nodesAPI              { return c.cs.CoreV1().Nodes() }
func (c clientsetBatch) Jobs(ns string) jobsAPI      { return c.cs.BatchV1().Jobs(ns) }
func (c clientsetNetworking) NetworkPolicies(ns string) policiesAPI {
	return c.cs.NetworkingV1().NetworkPolicies(ns)
}

// AgentsV1beta1: client-go's fake clientset knows no CRDs; tests of the agent-sandbox backend
// run against the real control plane.
func (c clientset) AgentsV1beta1() agentsAPI { return noAgents{} }

type noAgents struct{}

func (noAgents) Sandboxes(string) sandboxAPI { panic("the fake clientset has no agent-sandbox API") }
