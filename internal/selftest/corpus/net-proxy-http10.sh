# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: an HTTP/1.0 request with no Host header for the host's loopback
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -0 -H "Host:" "http://127.0.0.1:$port/$nonce"
