# class: host-read
# expect: blocked
# providers: local
# control: sandbox
# reason: /run (and /var/run) holds the host's sockets, pid files and mounted secrets (/run/secrets, a pod's service-account token); none of it is bound into the sandbox
r=""
for d in /run /var/run /var/run/secrets /run/secrets; do [ -d "$d" ] && r="$r $d: $(ls -A "$d" 2>&1 | head -5 | tr '\n' ' ')"; done
if [ -n "$r" ]; then report done "$r"; else report refused "no /run, /var/run or mounted secrets in the sandbox"; fi
