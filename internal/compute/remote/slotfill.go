package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// A Kubernetes warm slot's read-only places. A cold pod mounts each read-only
// bind of its dispatch (the bundle, the capability files, the inputs, the system trust store
// of a proxy dispatch) read-only, from an emptyDir its init step filled. A slot's pod is made
// before its dispatch exists, so it has a read-only mount at each place its template knows
// (a [SlotPlace]), and a second container, the filler, holds the writable side of those
// volumes: the worker's container never has them writable, so no process of the agent's can
// write there, chmod or not. At the claim the worker hands the filler the grant over a Unix
// socket ([SlotFillEnv]); the filler fetches the read-only mounts into the places, answers
// with a [SlotFillAnswer] and exits; the worker fetches the rest (workspace, out directory)
// into its writable /agora.
const (
	// SlotPlacesEnv holds the slot's places as JSON ([]SlotPlace), in the order of their
	// volumes (STAGE/p-INDEX), for the init step (which makes a file place's entry, and the
	// mount points of places nested in a directory place) and the filler.
	SlotPlacesEnv = "AGORA_SLOT_PLACES"
	// SlotFillEnv is the path of the filler's Unix socket, in the worker's and the filler's
	// environment: the filler listens there, the worker connects once it holds its grant.
	SlotFillEnv = "AGORA_SLOT_FILL"
	// SlotPlaceVolumePrefix prefixes a place's volume name and its directory in the stage.
	SlotPlaceVolumePrefix = "p-"
	// MaxSlotPlaces caps a slot's places; MaxSlotFillAnswer caps the filler's answer.
	MaxSlotPlaces     = 32
	MaxSlotFillAnswer = 8 << 10
	maxSlotPlacesEnv  = 16 << 10
)

// SlotPlace is one read-only place of a slot: a directory, or one regular file (mounted as
// the volume's [FileName] entry, a subPath mount).
type SlotPlace struct {
	Dst  string `json:"dst"`
	File bool   `json:"file,omitempty"`
}

// SlotFillAnswer is the filler's answer to the worker: the mounts it filled, by name, or why
// it could not.
type SlotFillAnswer struct {
	Filled []string `json:"filled"`
	Error  string   `json:"error,omitempty"`
}

// ParseSlotPlaces reads [SlotPlacesEnv]'s value strictly and checks it ([CheckSlotPlaces]).
func ParseSlotPlaces(s string) ([]SlotPlace, error) {
	if len(s) > maxSlotPlacesEnv {
		return nil, fmt.Errorf("%s: over %d bytes", SlotPlacesEnv, maxSlotPlacesEnv)
	}
	var ps []SlotPlace
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&ps); err != nil || d.More() {
		return nil, fmt.Errorf("%s: not a list of places", SlotPlacesEnv)
	}
	return ps, CheckSlotPlaces(ps)
}

// CheckSlotPlaces wants at most [MaxSlotPlaces] places, each a clean absolute path other
// than / and each once, none below a file place.
func CheckSlotPlaces(ps []SlotPlace) error {
	if len(ps) > MaxSlotPlaces {
		return fmt.Errorf("slot places: %d, at most %d", len(ps), MaxSlotPlaces)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if p.Dst == "" || p.Dst == "/" || !path.IsAbs(p.Dst) || path.Clean(p.Dst) != p.Dst || len(p.Dst) > 1024 || strings.ContainsAny(p.Dst, "\x00\\") {
			return fmt.Errorf("slot place %q: not a clean absolute path", p.Dst)
		}
		if seen[p.Dst] {
			return fmt.Errorf("slot place %q: twice", p.Dst)
		}
		seen[p.Dst] = true
	}
	for _, p := range ps {
		for _, q := range ps {
			if p.File && strings.HasPrefix(q.Dst, p.Dst+"/") {
				return fmt.Errorf("slot place %q: below the file place %q", q.Dst, p.Dst)
			}
		}
	}
	return nil
}

// ErrNotSlotPlace: a read-only mount of the dispatch has no place in the slot, or the slot a
// place the dispatch has no read-only mount for.
var ErrNotSlotPlace = errors.New("the dispatch's read-only mounts are not the slot's places")

// ReadOnlyMount says whether m is one a slot has a place for: neither written by the worker
// nor a directory of the host's sockets (the worker listens there).
func ReadOnlyMount(m Mount) bool { return !m.Writable && !m.Result && len(m.Sockets) == 0 }

// MatchSlotPlaces pairs each read-only mount of ms with the place of the same path and kind:
// the result maps a place's index to its mount. Every read-only mount must have its place and
// every place its mount, else [ErrNotSlotPlace]; no other mount may lie below a place (the
// worker could not make it in a read-only mount).
func MatchSlotPlaces(ps []SlotPlace, ms []Mount) (map[int]Mount, error) {
	byDst := map[string]int{}
	for i, p := range ps {
		byDst[p.Dst] = i
	}
	out := map[int]Mount{}
	for _, m := range ms {
		if !ReadOnlyMount(m) {
			for _, p := range ps {
				if m.Dst == p.Dst || strings.HasPrefix(m.Dst, p.Dst+"/") {
					return nil, fmt.Errorf("%w: the writable mount %q at %s is at or below the place %s", ErrNotSlotPlace, m.Name, m.Dst, p.Dst)
				}
			}
			continue
		}
		i, ok := byDst[m.Dst]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: the slot has no place at %s (mount %q)", ErrNotSlotPlace, m.Dst, m.Name)
		case ps[i].File != m.File:
			return nil, fmt.Errorf("%w: %s is a %s in the dispatch and a %s in the slot", ErrNotSlotPlace, m.Dst, kind(m.File), kind(ps[i].File))
		}
		if _, dup := out[i]; dup {
			return nil, fmt.Errorf("%w: two mounts at %s", ErrNotSlotPlace, m.Dst)
		}
		out[i] = m
	}
	for i, p := range ps {
		if _, ok := out[i]; !ok {
			return nil, fmt.Errorf("%w: the slot has a place at %s the dispatch has no read-only mount for", ErrNotSlotPlace, p.Dst)
		}
	}
	return out, nil
}

func kind(file bool) string {
	if file {
		return "file"
	}
	return "directory"
}
