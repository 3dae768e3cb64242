# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: the proxy is asked for the host's loopback written as one decimal number; the grant names it, and the proxy refuses loopback whatever the grant
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://2130706433:$port/$nonce"
