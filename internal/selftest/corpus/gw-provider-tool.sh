# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a request for a tool the provider runs itself (web search), which reaches hosts no grant allowed on the dispatch's account
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"web_search_options\":{},\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
