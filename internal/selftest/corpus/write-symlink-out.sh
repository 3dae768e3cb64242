# class: write-outside
# observe: dropfile
# expect: blocked
# control: sandbox
# reason: a symlink in the workspace to a host directory, written through, would plant files on the host; it resolves in the sandbox, where that directory does not exist
ln -s "$probe/drop" selftest-drop-link
attempt sh -c 'echo planted >selftest-drop-link/via-symlink'
rm -f selftest-drop-link
