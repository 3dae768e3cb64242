# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names a private address (172.16.0.0/12); the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://172.16.0.1/"
