# class: host-read
# expect: blocked
# providers: local
# control: sandbox
# reason: /var holds the host's state: the kubelet's and container engines' storage (/var/lib/kubelet, /var/lib/docker), logs, spools; the sandbox has none of it
if [ -d /var ]; then report done "/var is visible: $(ls -A /var /var/lib 2>&1 | head -8 | tr '\n' ' ')"; else report refused "no /var in the sandbox"; fi
