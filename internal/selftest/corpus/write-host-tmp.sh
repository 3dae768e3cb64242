# class: write-outside
# observe: dropfile
# expect: blocked
# control: sandbox
# reason: a world-writable host directory the runner watches; the sandbox's /tmp is its own tmpfs
attempt sh -c 'echo planted >"$1/drop/planted"' sh "$probe"
