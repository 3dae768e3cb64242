# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: .. from the workspace climbs only to the sandbox's own root; the host's directories above the stage are not in its mount namespace
attempt cat "../../../../../../../../../..$probe/secret"
