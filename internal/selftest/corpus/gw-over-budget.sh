# class: gateway
# subagent: gw
# observe: model
# dispatch: --budget-calls 1
# expect: blocked
# control: gateway
# reason: a model call past the dispatch's budget (one call, spent by the model's first answer)
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
