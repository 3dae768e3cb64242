# class: host-read
# expect: blocked
# control: sandbox
# reason: the host's password hashes; the sandbox's root is the host's system directories read-only, run as the dispatch's own uid
attempt head -c 64 /etc/shadow
