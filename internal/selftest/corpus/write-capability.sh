# class: write-outside
# expect: blocked
# control: sandbox
# reason: the capability files are bound read-only, so an agent cannot change what the next step runs
attempt sh -c 'echo "exit 0" >>"$AGORA_CAPABILITIES/selftest/run.sh"'
