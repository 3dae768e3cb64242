# class: network
# subagent: net
# observe: fixture
# dispatch: --env selftest-cred
# expect: blocked
# control: proxy
# reason: a credential bound to one TLS port of the granted host sent over TLS to another of its ports; a binding pins its port
need "$granted_tls2" "the granted host over TLS" || return 0
attempt curl -sS -f -k -o /dev/null --max-time 2 --noproxy '' -H "Authorization: Bearer $SELFTEST_TOKEN" "https://$granted_tls2/selftest/$nonce"
