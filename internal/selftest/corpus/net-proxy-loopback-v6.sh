# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: proxy
# reason: the proxy is asked for the host's IPv6 loopback ([::1]), which the grant names; the proxy refuses loopback whatever the grant
need "$port6" "an IPv6 loopback" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://[::1]:$port6/$nonce"
