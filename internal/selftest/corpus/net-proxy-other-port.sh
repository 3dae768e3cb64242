# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: grant
# reason: another port of the granted host (example.com:8443); the grant names port 443 only
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "https://example.com:8443/"
