# class: legitimate
# observe: state needs_input
# expect: allowed
# control: sandbox
# reason: a question in $AGORA_OUT/needs_input.json ends the dispatch needs_input
printf '{"question": "selftest: which way?", "options": ["a", "b"]}' >"$AGORA_OUT/needs_input.json"
report done "asked"
