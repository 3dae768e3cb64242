# class: host-read
# expect: blocked
# control: sandbox
# reason: a symlink in the workspace resolves inside the sandbox, where the host's AGORA_HOME does not exist
ln -s "$home/keys" selftest-keys-link
attempt ls selftest-keys-link/
rm -f selftest-keys-link
