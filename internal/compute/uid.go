package compute

// SandboxUIDs is how many host uids a target's sandboxes spread over, from its first
// (config's sandbox_uid) up. RLIMIT_NPROC and other kernel counters (inotify, message queue
// bytes, pending signals) are kept per host uid across containers, pods and namespaces: with
// one uid for every dispatch, one dispatch could spend them for all the others (fork up to
// RLIMIT_NPROC and no other dispatch forks). So every provider runs each dispatch as its own
// uid of the range.
const SandboxUIDs = 1 << 16

// maxSandboxUID is the largest uid of any range: ids from 2^31 up are mishandled by some
// kernel interfaces (setfsuid, devpts).
const maxSandboxUID = 1<<31 - 1

// SandboxUIDRange is the first and last uid of the range that starts at first (capped below
// 2^31).
func SandboxUIDRange(first uint32) (uint32, uint32) {
	return first, uint32(min(uint64(first)+SandboxUIDs-1, maxSandboxUID))
}

// SandboxUIDFor is the uid of the range from first that dispatch id runs as by default: the
// range's member at the id's FNV-1a hash. Two dispatches share it only by chance; a caller
// that must rule that out leases uids on top (internal/dispatch).
func SandboxUIDFor(first uint32, id string) uint32 {
	first, last := SandboxUIDRange(first)
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return first + h%(last-first+1)
}
