# class: network
# subagent: net
# expect: blocked
# control: grant
# reason: the grant names example.com:443 only; any other host is refused before a connection is made
attempt curl -sS -f -o /dev/null --max-time 5 https://example.org/
