# class: privilege
# expect: blocked
# control: sandbox
# reason: a new user namespace gives back every capability inside it and opens the kernel's namespaced surface; bubblewrap runs with --disable-userns
attempt unshare -U -r id -u
