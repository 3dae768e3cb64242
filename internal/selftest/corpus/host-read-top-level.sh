# class: host-read
# expect: blocked
# providers: local
# control: sandbox
# reason: the sandbox's root holds only the system directories it needs (/usr and its links, a few /etc files), /proc, /dev, /tmp and /agora; any other top-level directory is the host's
extra=""
for e in /* /.[!.]*; do
	[ -e "$e" ] || [ -L "$e" ] || continue
	case "$e" in
	/usr | /bin | /sbin | /lib | /lib32 | /lib64 | /libx32 | /etc | /proc | /dev | /tmp | /agora) ;;
	*) extra="$extra $e" ;;
	esac
done
if [ -n "$extra" ]; then report done "host directories visible:$extra"; else report refused "only the sandbox's own: $(echo /*)"; fi
