# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: the proxy runs on the host: asked for the host's loopback, which the grant names, it must refuse, or every local service is one request away
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://127.0.0.1:$port/$nonce"
