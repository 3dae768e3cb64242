# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: grant
# reason: the grant names example.com:443 and no other public host; any other is refused before a connection is made
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' https://example.org/
