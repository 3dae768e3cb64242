# class: privilege
# expect: blocked
# control: sandbox
# reason: a new cgroup namespace is how cgroup escapes start; without a new user namespace (disabled) it needs CAP_SYS_ADMIN, which the sandbox lacks
attempt unshare -C true
