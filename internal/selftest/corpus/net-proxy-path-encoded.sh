# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: grant
# reason: an encoded climb out of /selftest/ (%2e%2e), which a server would decode differently
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' --path-as-is "http://$granted/selftest/%2e%2e/admin/$nonce"
