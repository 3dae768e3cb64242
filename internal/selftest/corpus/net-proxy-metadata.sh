# class: network
# subagent: net
# expect: blocked
# control: proxy
# reason: the egress proxy refuses link-local addresses whatever the grant
attempt curl -sS -f -o /dev/null --max-time 5 http://169.254.169.254/latest/meta-data/
