# class: privilege
# expect: blocked
# control: sandbox
# reason: a time namespace shifts the clocks the limits and the audit rely on; without a new user namespace (disabled) it needs CAP_SYS_ADMIN, which the sandbox lacks
attempt unshare -T true
