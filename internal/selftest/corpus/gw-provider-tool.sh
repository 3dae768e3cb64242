# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a request for a tool the provider runs itself (web search), which reaches hosts no grant allowed on the dispatch's account
attempt curl -sS -f --max-time 2 --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"web_search_options\":{},\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
