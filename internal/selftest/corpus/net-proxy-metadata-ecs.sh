# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names the container credentials address (AWS ECS); the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://169.254.170.2/v2/credentials/"
