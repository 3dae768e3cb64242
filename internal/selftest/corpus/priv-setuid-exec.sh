# class: privilege
# expect: blocked
# control: sandbox
# reason: su is setuid root; under no_new_privs its setuid bit gives nothing, so it cannot read /etc/shadow or switch to root
attempt sh -c 'su -c "id -u" root </dev/null | grep -x 0'
