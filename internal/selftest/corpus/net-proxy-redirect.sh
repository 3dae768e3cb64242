# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: the granted host redirects to the host's loopback (a reflection); the proxy judges the redirect's target as any other request
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -L -H "Connection: close" "http://$granted/selftest/redirect/$port/$nonce"
