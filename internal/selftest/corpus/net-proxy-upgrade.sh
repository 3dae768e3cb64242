# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: proxy
# reason: a protocol upgrade (WebSocket) on a connection the proxy reads would carry bytes it cannot read
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' -H "Connection: Upgrade" -H "Upgrade: websocket" "http://$granted/selftest/$nonce"
