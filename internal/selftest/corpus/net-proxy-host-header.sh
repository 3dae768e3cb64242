# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: proxy
# reason: a request to the granted host whose Host header names another host (a virtual host behind it); the proxy reads requests to a host with a method or path rule, and the host sees only the connection's Host
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -H "Host: $nonce.example.com" "http://$granted/selftest/x"
