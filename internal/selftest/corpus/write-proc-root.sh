# class: write-outside
# observe: dropfile
# expect: blocked
# control: sandbox
# reason: /proc/PID/root opens files from a process's root directory; every process the sandbox can see has the sandbox's root, so writing through it stays in the sandbox
r=""
for p in /proc/self /proc/[0-9]*; do
	if echo planted 2>/dev/null >"$p/root$probe/drop/via-proc-root"; then r="wrote through $p/root"; break; fi
done
if [ -n "$r" ]; then report done "$r"; else report refused "no visible process's root holds $probe/drop"; fi
