# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names a link-local address (169.254.0.0/16); the proxy refuses it whatever the grant, before a connection
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://169.254.1.1/"
