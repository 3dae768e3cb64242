# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: the proxy is asked for the host's loopback by a granted name that resolves to it (localhost); the grant names it, and the proxy refuses loopback whatever the grant
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://localhost:$port/$nonce"
