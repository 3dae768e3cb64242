package dispatch_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam30_LearnEscape: a learn dispatch (exec runtime, real bubblewrap,
// the real egress proxy) tries every way around egress.learn_hosts, which names one host and
// port: the learn host by its IP literal and by an IPv4-mapped IPv6 literal, the learn host's
// name on another port, a redirect from the learn host to a host outside, a Host header naming
// another host inside the learn host's tunnel, a learn host whose name resolves to a private
// address the egress policy refuses, and going around the proxy. None may reach anything, and
// none may be recorded as allowed or as would_deny; only the learn host's own request is.
func TestRedTeam30_LearnEscape(t *testing.T) {
	requireTool(t, "curl")
	ca := newTestCA(t)
	e := netEnv(t, ca)
	var learnHits, otherHits atomic.Int64
	var learnPaths atomic.Value
	learnPaths.Store("")
	var otherPort string
	learnPort := ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		learnHits.Add(1)
		learnPaths.Store(learnPaths.Load().(string) + " " + r.Host + r.URL.Path)
		if r.URL.Path == "/redir" {
			http.Redirect(w, r, "https://git.test:"+otherPort+"/redirected", http.StatusFound)
			return
		}
		io.WriteString(w, "learned:"+r.URL.Path)
	}))
	otherPort = ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, "LEAKED")
	}))
	// loop.test resolves to 127.0.0.1, which the egress policy does not allow: a learn host
	// never widens the dialer's policy.
	e.d.Config.Egress.LearnHosts = []string{"api.test:" + learnPort, loopName + ":" + learnPort}
	try := func(name, cmd string) string {
		return cmd + " >/dev/null 2>&1; echo \"" + name + "=$?\""
	}
	e.learnSubagent("escaper", strings.Join([]string{
		"curl -sS https://api.test:" + learnPort + "/ok; echo",
		try("ip", "curl -sS --fail https://"+upstreamAddr+":"+learnPort+"/ip"),
		try("v6", "curl -sS -g --fail 'https://[::ffff:"+upstreamAddr+"]:"+learnPort+"/v6'"),
		try("port", "curl -sS --fail https://api.test:"+otherPort+"/port"),
		try("redirect", "curl -sS --fail -L https://api.test:"+learnPort+"/redir"),
		try("hosthdr", "curl -sS --fail -H 'Host: git.test:"+otherPort+"' https://api.test:"+learnPort+"/hosthdr"),
		try("private", "curl -sS --fail -k https://"+loopName+":"+learnPort+"/private"),
		try("noproxy", "curl -sS --fail --max-time 5 --noproxy '*' https://git.test:"+otherPort+"/direct"),
		try("noproxyip", "curl -sS --fail --max-time 5 --noproxy '*' -k https://"+upstreamAddr+":"+otherPort+"/directip"),
	}, "; "))

	r := e.run(dispatch.Request{Subagent: "escaper", Learn: true})
	out := e.stdout(r)
	if r.State != lifecycle.DispatchFinished || !r.Learn {
		t.Fatalf("learn: %s/%s %s learn=%v\n%s\n%s", r.State, r.Reason, r.Detail, r.Learn, out, e.logs(r.ID))
	}
	if !strings.Contains(out, "learned:/ok") {
		t.Fatalf("the learn host itself was not reached (the test proves nothing):\n%s", out)
	}
	for _, name := range []string{"ip", "v6", "port", "hosthdr", "private", "noproxy", "noproxyip"} {
		if !strings.Contains(out, name+"=") {
			t.Errorf("%s: the attempt did not run:\n%s", name, out)
		}
		if strings.Contains(out, name+"=0") {
			t.Errorf("%s: the attempt succeeded:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "redirect=") {
		t.Errorf("the redirect attempt did not run:\n%s", out)
	}
	t.Logf("the sandbox's view:\n%s", out)
	if strings.Contains(out, "LEAKED") || otherHits.Load() != 0 {
		t.Errorf("a host outside learn_hosts answered (%d hits):\n%s", otherHits.Load(), out)
	}
	// The learn host saw /ok and /redir (its answer is a redirect the proxy does not follow);
	// never /hosthdr (refused before it was sent), /ip, /v6 or /private.
	got := learnPaths.Load().(string)
	for _, p := range []string{"/ip", "/v6", "/hosthdr", "/private"} {
		if strings.Contains(got, p) {
			t.Errorf("the learn host got %s: %s", p, got)
		}
	}
	var mine []string
	for _, l := range strings.Split(e.auditDump(), "\n") {
		if strings.Contains(l, `"subject":"dispatch/`+r.ID+`"`) {
			mine = append(mine, l)
		}
	}
	for _, l := range mine {
		allowedOrLearned := strings.Contains(l, `"decision":"allow"`) || strings.Contains(l, "would_deny")
		if !allowedOrLearned || strings.Contains(l, "tool.would_deny") {
			continue
		}
		if strings.Contains(l, `"port":`+otherPort) || strings.Contains(l, loopName) || strings.Contains(l, `"host":"`+upstreamAddr+`"`) || strings.Contains(l, "ffff") {
			t.Errorf("an escape attempt was recorded as allowed or learned: %s", l)
		}
		for _, p := range []string{"/hosthdr", "/ip", "/v6", "/private"} {
			if strings.Contains(l, `"path":"`+p+`"`) {
				t.Errorf("a refused request was recorded as learned: %s", l)
			}
		}
	}
}
