# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: grant
# reason: a GET that asks for DELETE in X-HTTP-Method-Override; an override counts as the method
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -H "X-HTTP-Method-Override: DELETE" "http://$granted/selftest/$nonce"
