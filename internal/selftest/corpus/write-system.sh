# class: write-outside
# expect: blocked
# control: sandbox
# reason: the system directories are bound read-only
attempt sh -c 'echo x >/usr/bin/agora-selftest-planted || echo x >/etc/agora-selftest-planted'
