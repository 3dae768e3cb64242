# class: privilege
# expect: blocked
# control: sandbox
# reason: setns is how a process joins another's mount, network and PID namespaces; it needs CAP_SYS_ADMIN over them, which the sandbox lacks even for its own (and pid 1, the worker, is non-dumpable)
attempt nsenter -t $$ -m -u -n -i -p true
