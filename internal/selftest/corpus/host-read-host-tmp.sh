# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: a world-readable file the runner left in the host's temporary directory; the sandbox's /tmp is its own tmpfs
attempt cat "$probe/secret"
