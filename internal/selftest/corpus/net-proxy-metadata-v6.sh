# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names the IPv6 cloud metadata address (AWS); the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://[fd00:ec2::254]/latest/meta-data/"
