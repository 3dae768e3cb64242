package k8stest_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// surfaceTokenSecrets are the two Secrets deploy/kubernetes's header tells the operator to make
// before applying: the web view's operator token and MCP's, each a key token of 64 hex
// characters, made here from crypto/rand and never logged.
func surfaceTokenSecrets(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, name := range []string{"agora-web-token", "agora-mcp-token"} {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		out = append(out, secretObject(name, map[string][]byte{"token": []byte(hex.EncodeToString(b))}))
	}
	return out
}

// surfaceToken is the token of Secret name among objs (surfaceTokenSecrets'), as the operator
// reads it back with kubectl get secret.
func surfaceToken(t *testing.T, objs []map[string]any, name string) string {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "Secret" && dig(o, "metadata", "name") == name {
			data, _ := o["data"].(map[string]string) // secretObject's
			b, err := base64.StdEncoding.DecodeString(data["token"])
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("no Secret %s among the objects applied", name)
	return ""
}

// bearerRT adds a token to every request.
type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// surfaceGet is the status and body of GET url with the Host header host ("" keeps the URL's)
// and the bearer token ("" for none).
func surfaceGet(ctx context.Context, t *testing.T, url, host, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// waitPodReady waits for pod ns/name's Ready condition, the kubelet's verdict from the
// readiness probe as the manifest writes it, and for its containers to run.
func waitPodReady(ctx context.Context, t *testing.T, c *k8stest.Cluster, ns, name string) {
	t.Helper()
	for {
		var pod struct {
			Status struct {
				Conditions        []struct{ Type, Status string }
				ContainerStatuses []struct {
					Name  string
					Ready bool
					State map[string]any
				}
			}
		}
		if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+name, nil, &pod); err != nil {
			t.Fatal(err)
		}
		ready := slices.ContainsFunc(pod.Status.Conditions, func(c struct{ Type, Status string }) bool { return c.Type == "Ready" && c.Status == "True" })
		running := len(pod.Status.ContainerStatuses) == 2
		for _, s := range pod.Status.ContainerStatuses {
			running = running && s.State["running"] != nil
		}
		if ready && running {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s never Ready with both containers running: %+v\nmcp log:\n%s", name, pod.Status, podLog(context.Background(), c, ns, name, "mcp"))
		case <-time.After(time.Second):
		}
	}
}

// checkServeSurfaces is what a person reaches of the serve pod that deploy/kubernetes runs,
// from outside it, at its address (as a Service or kubectl port-forward hands the
// connection on): the pod is Ready (the kubelet's probes on the metrics listener pass); the
// metrics listener answers /metrics, /healthz and /readyz without a token, and refuses a Host
// that is not its Service's; the web view refuses a request without the token (401), with MCP's
// token, and with a foreign Host, and answers with its token under the Service's name; MCP
// over HTTP, reached by the official SDK's client, lists the tools of its ceiling (dispatch)
// with its token and refuses the connection without it or with the web view's.
func checkServeSurfaces(ctx context.Context, t *testing.T, c *k8stest.Cluster, serve podInfo, objs []map[string]any) {
	t.Helper()
	webToken, mcpToken := surfaceToken(t, objs, "agora-web-token"), surfaceToken(t, objs, "agora-mcp-token")
	waitPodReady(ctx, t, c, "agora", serve.name)
	base := func(port string) string { return "http://" + net.JoinHostPort(serve.ip, port) }

	// Metrics: no token, inside the cluster (and a scraper by the Service's name).
	for path, want := range map[string]string{"/metrics": "agora_", "/healthz": "ok", "/readyz": `"ready":true`} {
		if code, body := surfaceGet(ctx, t, base("9090")+path, "", ""); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("metrics %s: %d %q, want 200 with %q", path, code, tail(body, 300), want)
		}
	}
	if code, _ := surfaceGet(ctx, t, base("9090")+"/metrics", "agora-metrics.agora.svc:9090", ""); code != http.StatusOK {
		t.Errorf("metrics by the Service's name: %d, want 200 (--metrics-allow-host)", code)
	}
	if code, _ := surfaceGet(ctx, t, base("9090")+"/metrics", "rebound.example:9090", ""); code != http.StatusForbidden {
		t.Errorf("metrics with a foreign Host: %d, want 403", code)
	}

	// The web view: its token, and only its token, under the Service's names.
	for _, c := range []struct {
		name, host, token string
		want              int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"MCP's token", "", mcpToken, http.StatusUnauthorized},
		{"a wrong token", "", strings.Repeat("0", 64), http.StatusUnauthorized},
		{"its token", "", webToken, http.StatusOK},
		{"its token, by the Service's name", "agora-web.agora.svc.cluster.local:8080", webToken, http.StatusOK},
		{"its token, a rebound name", "rebound.example:8080", webToken, http.StatusForbidden},
	} {
		if code, body := surfaceGet(ctx, t, base("8080")+"/api/runs", c.host, c.token); code != c.want {
			t.Errorf("web view, %s: %d %q, want %d", c.name, code, tail(body, 200), c.want)
		}
	}

	// MCP over HTTP with the SDK's client. agora mcp starts once serve is ready: wait for it.
	url := base("8765") + "/mcp"
	connect := func(token string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: bearerRT{token: token, next: http.DefaultTransport}, Timeout: 20 * time.Second}
		return mcp.NewClient(&mcp.Implementation{Name: "k8stest", Version: "v0"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	}
	var cs *mcp.ClientSession
	err := agoratest.Await(90*time.Second, func() (err error) {
		if ctx.Err() != nil {
			return nil // the test's end: said below
		}
		cs, err = connect(mcpToken)
		return err
	})
	if err == nil && cs == nil {
		err = ctx.Err()
	}
	if err != nil {
		t.Fatalf("MCP with its token: %v\nmcp log:\n%s", err, podLog(context.Background(), c, "agora", serve.name, "mcp"))
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("MCP tools/list: %v", err)
	}
	var tools []string
	for _, tool := range res.Tools {
		tools = append(tools, tool.Name)
	}
	if !slices.Contains(tools, "agora_dispatch") || slices.Contains(tools, "agora_orchestrator_submit") || len(tools) != 10 {
		t.Errorf("MCP lists %v: want the 10 tools of ceiling dispatch (agora_dispatch, not agora_orchestrator_submit)", tools)
	}
	for name, token := range map[string]string{"no token": "", "the web view's token": webToken} {
		if s, err := connect(token); err == nil {
			s.Close()
			t.Errorf("MCP with %s: connected", name)
		} else if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("MCP with %s: refused, but not as unauthorized: %v", name, err)
		}
	}
	// The pod's own account of it: MCP serves the home serve serves.
	var first struct{ Home string }
	if log := podLog(ctx, c, "agora", serve.name, "mcp"); !strings.Contains(log, `"msg":"mcp server home"`) {
		t.Errorf("the mcp container's log names no home:\n%s", log)
	} else {
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, `"msg":"mcp server home"`) {
				_ = json.Unmarshal([]byte(l), &first)
				break
			}
		}
		if first.Home != "/var/lib/agora/home" {
			t.Errorf("agora mcp serves %q, want serve's home /var/lib/agora/home", first.Home)
		}
	}
	for _, ctr := range []string{"agora", "mcp"} {
		if log := podLog(ctx, c, "agora", serve.name, ctr); strings.Contains(log, webToken) || strings.Contains(log, mcpToken) {
			t.Errorf("the %s container's log holds a token", ctr)
		}
	}
	t.Logf("serve pod %s: metrics, the web view and MCP (%d tools) answer as written", serve.name, len(tools))
}
