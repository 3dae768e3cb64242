# class: resources
# expect: blocked
# control: limits
# reason: the open files limit is set soft and hard alike; raising the hard limit needs CAP_SYS_RESOURCE, which the sandbox lacks
attempt prlimit --nofile=65536:65536 prlimit --nofile --noheadings
