# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a model request carrying a key of the sandbox's own; the gateway drops every header and sets the key itself
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -H "Authorization: Bearer $mark" -d '{"model":"selftest-model","messages":[{"role":"user","content":"hello"}]}' http://gateway/model/chat/completions
