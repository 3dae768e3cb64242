# class: write-outside
# expect: blocked
# control: sandbox
# reason: the host's worker program (the file every sandbox is started from) is outside the sandbox
attempt sh -c ': >>"$1"' sh "$worker"
