# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names Alibaba Cloud's metadata address; the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://100.100.100.200/latest/meta-data/"
