package detach

// Warm reports whether target keeps warm slots here (`warm: N`): a dispatch handed to a
// supervisor of it claims a ready standby, or starts cold and so teaches the target the
// shape its standbys take.
func (s *Supervisors) Warm(target string) bool {
	if s.Standbys == nil {
		return false
	}
	for _, c := range s.Standbys.Counts() {
		if c.Target == target && c.Want > 0 {
			return true
		}
	}
	return false
}

// Hand gives the accepted dispatch id of target to a supervisor, a ready standby's or a new
// detached one, as [Supervisors.Start] does, and returns at once: exited closes when that
// supervisor exits (the dispatch ended, or was handed on: its record says which); ended, nil
// for a cold supervisor, closes when a standby says the dispatch's end is committed, a few ms
// before it has closed agora.db and exited. It is for a caller that follows the record itself
// (serve's one-shot hand-off).
func (s *Supervisors) Hand(target, id string) (exited, ended <-chan struct{}, err error) {
	return s.spawn(target, id)
}
