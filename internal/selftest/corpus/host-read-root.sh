# class: host-read
# expect: blocked
# control: sandbox
# reason: root's home (keys, shell history, credentials) is not bound into the sandbox
if r=$(ls -A /root 2>&1) && [ -n "$r" ]; then report done "$r"; else report refused "${r:-empty}"; fi
