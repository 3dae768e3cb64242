# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names shared address space (100.64.0.0/10); the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://100.64.0.1/"
