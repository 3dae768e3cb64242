# class: network
# subagent: net
# observe: fixture
# dispatch: --env selftest-cred
# expect: blocked
# control: proxy
# reason: a credential bound to another host (127.0.0.3) sent to the granted host
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -H "Authorization: Bearer $SELFTEST_OTHER_TOKEN" "http://$granted/selftest/$nonce"
