# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names an IPv6 unique local address (fc00::/7); the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://[fc00::1]/"
