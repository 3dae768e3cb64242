# class: write-outside
# observe: dropfile
# expect: blocked
# control: sandbox
# reason: a symlink in the outputs directory to a host directory: neither the agent's writes nor the host's collection of outputs may follow it out
ln -s "$probe/drop" "$out/selftest-drop-link"
attempt sh -c 'echo planted >"$1/selftest-drop-link/via-outputs"' sh "$out"
