# class: host-read
# expect: blocked
# control: sandbox
# reason: other users' home directories (keys, histories, credentials) are not bound into the sandbox
if [ -d /home ]; then report done "/home is visible: $(ls -A /home 2>&1 | head -5)"; else report refused "no /home in the sandbox"; fi
