# class: network
# subagent: net
# expect: blocked
# control: proxy
# reason: private ranges are refused unless egress.allow_private names them
attempt curl -sS -f -o /dev/null --max-time 5 http://10.0.0.1/
