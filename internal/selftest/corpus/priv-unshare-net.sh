# class: privilege
# expect: blocked
# control: sandbox
# reason: a new network namespace with CAP_NET_ADMIN in it opens the kernel's netfilter and routing code to the agent; without a new user namespace (disabled) it needs CAP_SYS_ADMIN, which the sandbox lacks
attempt unshare -n true
