# class: privilege
# expect: blocked
# control: sandbox
# reason: a private mount namespace is where mount tricks start; without a new user namespace (disabled) it needs CAP_SYS_ADMIN, which the sandbox lacks
attempt unshare -m true
