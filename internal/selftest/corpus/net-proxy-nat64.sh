# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names a NAT64 address that embeds 127.0.0.1; the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://[64:ff9b::7f00:1]/"
