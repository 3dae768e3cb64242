package kubernetes

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/k8stest"
)

// pullProvider is clusterProvider with the target's pull settings.
func pullProvider(t *testing.T, secrets []string, policy string) *Provider {
	t.Helper()
	p, _ := clusterProvider(t, &fakeExporter{})
	o := p.opts
	o.PullSecrets, o.PullPolicy = secrets, policy
	q, err := newProvider(o, p.client)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// makeSecret makes a Secret of type typ in the provider's namespace, as the cluster's operator
// would (kubectl create secret docker-registry), removed at the test's end.
func makeSecret(t *testing.T, p *Provider, name string, typ corev1.SecretType, data map[string][]byte) {
	t.Helper()
	_, err := p.client.CoreV1().Secrets(p.ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Type: typ, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.client.CoreV1().Secrets(p.ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// A Job of a target with pull settings, as the API server stored it and its pod as the Job
// controller made it: every container (the init container too) has the target's policy, and
// the pod names the target's Secrets, in order. The default is IfNotPresent and no Secrets,
// as before the settings existed.
func TestPull_ClusterJobPodCarriesSettings(t *testing.T) {
	p := pullProvider(t, []string{"regcred", "mirror.cred"}, PullAlways)
	id := clusterID("PULL")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cancel(context.Background(), h.TaskID()) })
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkPull(t, "job template", job.Spec.Template.Spec, []string{"regcred", "mirror.cred"}, corev1.PullAlways)
	checkPull(t, "pod", dispatchPod(t, p, id).Spec, []string{"regcred", "mirror.cred"}, corev1.PullAlways)

	d := pullProvider(t, nil, "")
	id = clusterID("PULLDEF")
	h, err = d.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Cancel(context.Background(), h.TaskID()) })
	checkPull(t, "default pod", dispatchPod(t, d, id).Spec, nil, corev1.PullIfNotPresent)
}

// dispatchPod waits for the Job controller to make the dispatch's pod.
func dispatchPod(t *testing.T, p *Provider, id string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
		if err == nil && len(pods.Items) == 1 {
			return &pods.Items[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no pod of %s", id)
	return nil
}

func checkPull(t *testing.T, what string, pod corev1.PodSpec, secrets []string, policy corev1.PullPolicy) {
	t.Helper()
	var got []string
	for _, s := range pod.ImagePullSecrets {
		got = append(got, s.Name)
	}
	if strings.Join(got, ",") != strings.Join(secrets, ",") {
		t.Errorf("%s: imagePullSecrets %v, want %v", what, got, secrets)
	}
	if len(pod.InitContainers) == 0 {
		t.Errorf("%s: no init container", what)
	}
	for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
		if c.ImagePullPolicy != policy {
			t.Errorf("%s: container %s pulls %s, want %s", what, c.Name, c.ImagePullPolicy, policy)
		}
	}
}

// doctor's probe of the pull secrets on the real API server, under the documented Role's verbs
// (a dry-run patch): a registry credential of either type passes; a missing name, an Opaque
// Secret, and agora's own kind of Secret (a dispatch's token and proxy password, Opaque) are
// each reported by name; the findings never hold a Secret's data.
func TestPull_ClusterProbeReportsMissingAndWrongType(t *testing.T) {
	p, c := clusterProvider(t, &fakeExporter{})
	const secretValue = "registry-password-that-must-not-print"
	dockerJSON := map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"r.example":{"auth":"` + secretValue + `"}}}`)}
	makeSecret(t, p, "pull-json", corev1.SecretTypeDockerConfigJson, dockerJSON)
	makeSecret(t, p, "pull-cfg", corev1.SecretTypeDockercfg, map[string][]byte{corev1.DockerConfigKey: []byte(`{"r.example":{"auth":"` + secretValue + `"}}`)})
	makeSecret(t, p, "pull-opaque", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte(secretValue)})
	if err := ProbePullSecrets(t.Context(), c.Kubeconfig, "", c.Namespace, []string{"pull-json", "pull-cfg"}); err != nil {
		t.Errorf("probe of two registry credentials: %v", err)
	}
	err := ProbePullSecrets(t.Context(), c.Kubeconfig, "", c.Namespace, []string{"pull-json", "pull-missing", "pull-opaque"})
	if err == nil {
		t.Fatal("probe of a missing and an Opaque secret passed")
	}
	for _, want := range []string{`"pull-missing" does not exist`, `"pull-opaque" in namespace "` + c.Namespace + `" is not of type kubernetes.io/dockerconfigjson`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("probe error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pull-json") || strings.Contains(err.Error(), secretValue) {
		t.Errorf("probe error names the good secret or a secret's data: %q", err)
	}
	// Nothing was changed by the dry runs: the credential is as it was made.
	s, gerr := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), "pull-json", metav1.GetOptions{})
	if gerr != nil || s.Type != corev1.SecretTypeDockerConfigJson || string(s.Data[corev1.DockerConfigJsonKey]) != string(dockerJSON[corev1.DockerConfigJsonKey]) {
		t.Errorf("pull-json after the probe: %v, %v", s, gerr)
	}
}

// The probe runs under the Role docs/providers-k8s.md shows and nothing else: the dry-run
// patch needs no `get` on secrets, which the Role does not grant (and a `get` would fetch the
// Secret's data).
func TestPull_ClusterProbeUnderDocumentedRole(t *testing.T) {
	p, c := clusterProvider(t, &fakeExporter{})
	docs, err := os.ReadFile("../../../examples/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyYAML(t.Context(), []byte(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+c.Namespace))); err != nil && !alreadyApplied(err) {
		t.Fatalf("apply the documented Role: %v", err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(t.Context(), "agora")
	if err != nil {
		t.Fatal(err)
	}
	makeSecret(t, p, "role-pull", corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)})
	makeSecret(t, p, "role-opaque", corev1.SecretTypeOpaque, nil)
	if err := ProbePullSecrets(t.Context(), kubeconfig, "", c.Namespace, []string{"role-pull"}); err != nil {
		t.Errorf("probe under the documented Role: %v", err)
	}
	err = ProbePullSecrets(t.Context(), kubeconfig, "", c.Namespace, []string{"role-opaque", "role-missing"})
	if err == nil || !strings.Contains(err.Error(), `"role-opaque" in namespace`) || !strings.Contains(err.Error(), `"role-missing" does not exist`) {
		t.Errorf("probe under the documented Role of an Opaque and a missing secret = %v", err)
	}
	// The Role really does not grant get: the probe's way is not a read in disguise.
	sa, err := New(Options{Kubeconfig: kubeconfig, Namespace: c.Namespace, Image: testImage, WorkerImage: testWorkerImage,
		GatewayURL: testGateway, GatewayCA: testCA(t), Exporter: &fakeExporter{}, Target: "k8s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.client.CoreV1().Secrets(c.Namespace).Get(t.Context(), "role-pull", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get of a secret under the documented Role = %v, want forbidden", err)
	}
}

// The attack: name, as a pull secret, the Secret agora itself makes for a dispatch (its token,
// CA and egress proxy password, Opaque). The setting is refused before any pod names it, and
// were it let through, doctor's probe says it is no registry credential.
func TestPull_ClusterOwnDispatchSecretRefused(t *testing.T) {
	p, c := clusterProvider(t, &fakeExporter{})
	id := clusterID("OWN")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cancel(context.Background(), h.TaskID()) })
	own := objectName(id)
	o := p.opts
	o.PullSecrets = []string{own}
	if _, err := newProvider(o, p.client); err == nil || !strings.Contains(err.Error(), "agora's own Secrets") {
		t.Errorf("a target naming agora's dispatch Secret %s as a pull secret = %v, want refused", own, err)
	}
	err = probePullSecrets(t.Context(), p.client.(*restCluster).core, "test", c.Namespace, []string{own})
	if err == nil || !strings.Contains(err.Error(), "is not of type") || strings.Contains(err.Error(), "proxy-password-xyz") {
		t.Errorf("probe of agora's own dispatch Secret = %v, want not a registry credential", err)
	}
}

// agent-sandbox's Sandbox holds the Job's pod spec, pull settings included, and so does its pod.
func TestPull_ClusterAgentSandboxCarriesSettings(t *testing.T) {
	base := sandboxProvider(t, &fakeExporter{})
	o := base.opts
	o.PullSecrets, o.PullPolicy = []string{"regcred"}, PullNever
	p, err := newProvider(o, base.client)
	if err != nil {
		t.Fatal(err)
	}
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBPULL")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cancel(context.Background(), h.TaskID()) })
	sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkPull(t, "sandbox template", sb.Spec.PodTemplate.Spec, []string{"regcred"}, corev1.PullNever)
	checkPull(t, "sandbox pod", dispatchPod(t, p, id).Spec, []string{"regcred"}, corev1.PullNever)
}

// alreadyApplied: another test of the shared cluster applied the documented file first.
func alreadyApplied(err error) bool {
	var se *k8stest.StatusError
	return errors.As(err, &se) && se.Code == http.StatusConflict
}
