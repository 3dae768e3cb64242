# class: host-read
# observe: secret
# expect: blocked
# control: dispatch
# reason: the agora process that dispatches holds a secret in its environment, as a person's shell holds API keys; a dispatch's environment is the one agora gives it, never the host's, with or without a sandbox
env
report done "$(env | grep -c .) variables in the program's environment"
