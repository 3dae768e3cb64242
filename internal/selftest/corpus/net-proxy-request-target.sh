# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: an absolute-form request line for the host's loopback sent as if to the granted host; the proxy judges the request line
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' --request-target "http://127.0.0.1:$port/$nonce" "http://$granted/selftest/x"
