# class: host-read
# observe: secret
# expect: blocked
# control: dispatch
# reason: the agent's environment is exactly what docs/exec.md lists; the dispatching agora's own environment (here, a secret) is never inherited
r=$(env | sed -n 's/^AGORA_SELFTEST_PROBE=//p')
if [ -n "$r" ]; then report done "$r"; else report refused "environment: $(env | cut -d= -f1 | sort | tr '\n' ' ')"; fi
