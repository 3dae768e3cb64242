# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a body that names the model twice, so that the gateway and the API could read different models
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
