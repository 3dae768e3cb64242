# class: network
# subagent: net
# observe: fixture
# dispatch: --env selftest-cred
# expect: blocked
# control: proxy
# reason: a bound credential's placeholder base64-encoded in a header to another host
need "$granted" "the granted host (127.0.0.2)" || return 0
enc=$(printf '%s' "$SELFTEST_OTHER_TOKEN" | base64 | tr -d '\n')
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -H "X-Debug: $enc" "http://$granted/selftest/$nonce"
