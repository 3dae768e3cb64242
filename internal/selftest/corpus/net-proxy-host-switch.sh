# class: network
# subagent: net
# observe: fixture
# dispatch: --env selftest-cred
# expect: blocked
# control: proxy
# reason: a Host header that differs from the CONNECT target, inside a TLS session the proxy terminates (a credential is bound to the host); the proxy refuses a request for another host
need "$granted_tls" "the granted host over TLS" || return 0
attempt curl -sS -f -k -o /dev/null --max-time 2 --noproxy '' -H "Host: $nonce.example.com" "https://$granted_tls/selftest/x"
