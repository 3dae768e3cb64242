# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: the proxy is asked for the host's loopback by the unspecified address 0.0.0.0; the grant names it, and the proxy refuses loopback whatever the grant
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://0.0.0.0:$port/$nonce"
