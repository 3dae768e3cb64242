# class: write-outside
# expect: blocked
# control: sandbox
# reason: the worker program is bound read-only; changing it would run the agent's code as the next step of the worker
attempt sh -c ': >>/agora/bin/agora-worker'
