# class: gateway
# subagent: gw
# observe: model
# expect: allowed
# control: gateway
# reason: the subagent's own model is reachable through the gateway: the twin of the gw- attacks, which shows the model sees what the gateway forwards
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
