package local

import "github.com/agora-dev/agora/internal/compute/host"

// currentBoot is the boot id this package binds task ids to and checks them against; tests
// replace it to stand for a later boot. It returns "" when the boot's id is unknown.
var currentBoot = func() string {
	id, _ := host.BootID()
	return id
}

// ofThisBoot reports whether an identity made in boot may name a process of the running
// boot. An identity with no boot ("") predates boot ids: it is judged as it always was (by
// pid and start time, and what else its checker knows), since nothing in it tells its boot.
// One made in another boot, or checked by a process that cannot read the running boot's id
// (its /proc is not the one the identity was made in), is not: the process it named is gone,
// and its pid and start time may name another now.
func ofThisBoot(boot string) bool {
	if boot == "" {
		return true
	}
	cur := currentBoot()
	return cur != "" && boot == cur
}
