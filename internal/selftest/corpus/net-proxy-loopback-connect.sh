# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: the proxy is asked for the host's loopback as a CONNECT tunnel; the grant names it, and the proxy refuses loopback whatever the grant
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -p "http://127.0.0.1:$port/$nonce"
