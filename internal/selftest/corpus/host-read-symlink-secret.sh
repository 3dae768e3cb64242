# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: a symlink the agent makes resolves in the sandbox's mount namespace, where the host's file does not exist
ln -s "$probe/secret" selftest-secret-link
attempt cat selftest-secret-link
rm -f selftest-secret-link
