# class: network
# subagent: net
# observe: fixture
# dispatch: --env selftest-cred
# expect: allowed
# control: proxy
# reason: a bound credential reaches its own host over HTTPS, swapped in by the proxy: the twin of the credential attacks, which shows the granted host sees what the proxy sends
need "$granted_tls" "the granted host over TLS" || return 0
attempt curl -sS -f -k -o /dev/null --max-time 15 --noproxy '' -H "Authorization: Bearer $SELFTEST_TOKEN" "https://$granted_tls/selftest/$nonce"
