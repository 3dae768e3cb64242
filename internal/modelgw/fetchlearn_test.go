package modelgw

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

// TestGateway_FetchLearn: in a learn dispatch a /fetch (openai's
// http_fetch, claude's WebFetch) to a host the grant refuses but egress.learn_hosts admits is
// recorded as net.would_deny (via fetch, method, path, host and port) before it is sent, and
// answered; so is a redirect hop to such a host. The attacks: a host outside learn_hosts, a
// redirect from a learn host to one outside it, a learn host on another port than the one
// learn_hosts names, and the same fetch from a dispatch that is not a learn one (learn hosts
// configured, Learn off): all refused as today, nothing sent, no would_deny. Failed before:
// the gateway refused every host outside the grant, learn or not.
func TestGateway_FetchLearn(t *testing.T) {
	evil := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "exfiltrated") })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/to-evil" {
			http.Redirect(w, r, evil.at("evil.test")+"/x", http.StatusFound)
			return
		}
		if r.URL.Path == "/to-learn" {
			http.Redirect(w, r, "/landed", http.StatusFound)
			return
		}
		io.WriteString(w, "learned:"+r.Method+":"+r.URL.Path)
	})
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	cfg := Config{Egress: grant.MustEgressRules("granted.test"), Learn: true,
		LearnHosts: grant.MustEgressRules("learn.test:" + port)}
	h := start(t, cfg)
	wouldDeny := func() []entry.WouldDenyEntry {
		var out []entry.WouldDenyEntry
		for _, d := range h.audit.ofKind(entry.NetWouldDeny) {
			w, _ := entry.ReadWouldDeny(entry.NetWouldDeny, d)
			out = append(out, w)
		}
		return out
	}

	status, reply, msg := h.fetch(t, fmt.Sprintf(`{"url":%q,"method":"GET"}`, up.at("learn.test")+"/v1/items"))
	if body, _ := base64.StdEncoding.DecodeString(reply.BodyBase64); status != http.StatusOK || string(body) != "learned:GET:/v1/items" {
		t.Fatalf("a learn host's fetch: %d %q %q, want 200 and its answer", status, body, msg)
	}
	w := wouldDeny()
	if len(w) != 1 || w[0].Host != "learn.test" || w[0].Port != port || w[0].Method != "GET" || w[0].Path != "/v1/items" ||
		w[0].Role != testRole || !strings.Contains(w[0].Reason, "not granted") {
		t.Fatalf("net.would_deny = %+v, want one for GET learn.test:%s/v1/items", w, port)
	}
	if d := h.audit.ofKind(entry.NetWouldDeny)[0]; d[entry.KeyVia] != "fetch" || d["dispatch"] != testDispatchID {
		t.Errorf("net.would_deny details %v, want via fetch and the dispatch", d)
	}
	// A redirect within the learn host is judged (and recorded) again, hop by hop.
	if status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("learn.test")+"/to-learn")); status != http.StatusOK {
		t.Errorf("a redirect within the learn host: %d %q", status, msg)
	}
	if n := len(wouldDeny()); n != 3 {
		t.Errorf("%d net.would_deny after the redirect, want 3 (each hop)", n)
	}

	for name, url := range map[string]string{
		"outside learn_hosts":         evil.at("evil.test") + "/x",
		"learn host, another port":    "http://learn.test:1/x",
		"redirect out of learn hosts": up.at("learn.test") + "/to-evil",
	} {
		before := len(wouldDeny())
		status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, url))
		if status != http.StatusForbidden || !strings.Contains(msg, "not granted") {
			t.Errorf("%s: %d %q, want 403 not granted", name, status, msg)
		}
		if name == "redirect out of learn hosts" {
			before++ // the first hop, to the learn host, is learned
		}
		if n := len(wouldDeny()); n != before {
			t.Errorf("%s: %d net.would_deny, want %d", name, n, before)
		}
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("the host outside learn_hosts got %d requests", n)
	}

	plainCfg := cfg
	plainCfg.Learn = false
	plain := start(t, plainCfg)
	hits := up.hits.Load()
	if status, _, msg := plain.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("learn.test")+"/v1/items")); status != http.StatusForbidden {
		t.Errorf("not a learn dispatch: %d %q, want 403", status, msg)
	}
	if n := len(plain.audit.ofKind(entry.NetWouldDeny)); n != 0 || up.hits.Load() != hits {
		t.Errorf("not a learn dispatch: %d would_deny, %d requests sent", n, up.hits.Load()-hits)
	}
}
