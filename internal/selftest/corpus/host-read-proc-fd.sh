# class: host-read
# expect: blocked
# control: sandbox
# reason: a host process's open files (/proc/PID/fd) reach what its path cannot: the dispatching agora holds agora.db open
for f in /proc/[0-9]*/fd/*; do
	case "$(readlink "$f" 2>/dev/null)" in
	*/agora.db)
		attempt sh -c 'readlink "$1" && head -c 16 "$1" | od -c | head -1' sh "$f"
		exit 0
		;;
	esac
done
report refused "no open agora.db among the visible processes' descriptors"
