# class: write-outside
# expect: blocked
# control: sandbox
# reason: writing into AGORA_HOME would change the catalog or the log behind agora's back
attempt sh -c 'echo x >"$1/selftest-planted"' sh "$home"
