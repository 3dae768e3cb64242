# class: write-outside
# observe: dropfile
# expect: blocked
# control: sandbox
# reason: .. from the workspace climbs only to the sandbox's own root, never to the host directories above the stage
attempt sh -c 'echo planted >"../../../../../../../../../..$1/drop/via-dotdot"' sh "$probe"
