# class: gateway
# subagent: gw
# observe: model
# dispatch: --budget-calls 1
# expect: blocked
# control: gateway
# reason: a model call past the dispatch's budget (one call, spent by the model's first answer)
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
