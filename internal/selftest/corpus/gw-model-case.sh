# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: the subagent's model spelt in another case; the model is matched exactly
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d "{\"model\":\"Selftest-Model\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
