# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: a hard link needs the host file in the same file system; the workspace is its own mount and the host's file is not in the sandbox
if ln "$probe/secret" selftest-secret-hardlink 2>/dev/null; then
	attempt cat selftest-secret-hardlink
	rm -f selftest-secret-hardlink
else
	attempt ln "$probe/secret" selftest-secret-hardlink
fi
