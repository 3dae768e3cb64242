# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: grant
# reason: a path of the granted host outside the rule's /selftest/
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://$granted/admin/$nonce"
