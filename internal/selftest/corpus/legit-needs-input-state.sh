# class: legitimate
# observe: state needs_input
# expect: allowed
# control: sandbox
# reason: a question with options and partial state ends the dispatch needs_input, ready to resume
printf '{"question": "selftest: which branch naming?", "options": ["feature/*", "topic/*"], "partial_state": {"step": 2, "done": ["a", "b"]}}' >"$AGORA_OUT/needs_input.json"
report done "asked, with partial_state"
