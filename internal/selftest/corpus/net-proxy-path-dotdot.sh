# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: grant
# reason: a path under /selftest/ that climbs out of it (/selftest/../admin)
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' --path-as-is "http://$granted/selftest/../admin/$nonce"
