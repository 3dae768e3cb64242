# class: gateway
# subagent: gw
# observe: listener
# expect: blocked
# control: grant
# reason: the gateway's fetch asked for the host's loopback; the subagent's grant names no host
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d "{\"url\":\"http://127.0.0.1:$port/$nonce\",\"method\":\"GET\"}" http://gateway/fetch
