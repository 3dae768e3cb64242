# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names a private address (10.0.0.1); private ranges are refused unless egress.allow_private names them
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' http://10.0.0.1/
