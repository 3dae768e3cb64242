package agoratest

import (
	"os"
	"strconv"
	"strings"
)

// StandbyPIDs are the running (not zombie) `agora supervise --standby` processes of the home
// at dir: the warm-slot holders a serve keeps. Tests wait on them to pick the ready slot
// and to let a home go only once they have unmounted their stages.
func StandbyPIDs(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "supervise\x00--standby") {
			continue
		}
		env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil || !strings.Contains(string(env), "AGORA_HOME="+dir+"\x00") || !Running(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out
}
