# class: privilege
# expect: blocked
# control: sandbox
# reason: a new UTS namespace with its own hostname is kernel surface the sandbox has no use for; without a new user namespace (disabled) it needs CAP_SYS_ADMIN, which the sandbox lacks
attempt unshare -u true
