# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: /proc/PID/root opens files from a process's root directory; every process the sandbox can see has the sandbox's root, so the host's files stay out of reach
r=$(for p in /proc/[0-9]* /proc/self; do cat "$p/root$probe/secret" 2>/dev/null; done | head -1)
if [ -n "$r" ]; then report done "$r"; else report refused "no visible process's root holds $probe/secret"; fi
