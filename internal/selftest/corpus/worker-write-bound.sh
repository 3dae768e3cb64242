# class: write-outside
# expect: blocked
# control: sandbox
# reason: the worker program is bound read-only; changing it would run the agent's code as the next step of the worker
if [ ! -e /agora/bin/agora-worker ]; then
	report missing "the worker is not bound at /agora/bin/agora-worker here (no sandbox binds it)"
	return 0
fi
attempt sh -c ': >>/agora/bin/agora-worker'
