# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: grant
# reason: a POST to the granted host, whose rule allows GET and HEAD only
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -X POST -d x "http://$granted/selftest/$nonce"
