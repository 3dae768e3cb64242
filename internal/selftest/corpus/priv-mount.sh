# class: privilege
# expect: blocked
# control: sandbox
# reason: a mount would lay another tree over the sandbox's binds
mkdir -p "$HOME/m"
attempt mount -t tmpfs selftest "$HOME/m"
