# class: privilege
# expect: blocked
# control: sandbox
# reason: chage is setgid shadow, the group that reads every password hash; under no_new_privs the bit gives nothing (and /etc/shadow is not in the sandbox)
attempt chage -l "$(id -un 2>/dev/null || id -u)"
