# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: grant
# reason: a name that carries data (NONCE.example.com): refused by the grant before the proxy resolves it, so no lookup leaves the host
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "https://$nonce.example.com/"
