package netgw

import (
	"errors"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Route kinds, the first segment after the dispatch id.
const (
	routeSession = "session"
	routeMounts  = "mounts"
	routeFiles   = "files"
	routeStreams = "streams"
	routeSockets = "sockets"
)

// maxFiles bounds the file index a route may name.
const maxFiles = 64

// route is a parsed request path below [remote.RoutePrefix].
type route struct {
	dispatch string
	kind     string
	name     string // mount name, stream name or socket mount
	index    int    // files/I
	socket   string // sockets/NAME/SOCKET
}

var errBadRoute = errors.New("no such route")

// parseRoute parses an escaped request path strictly: every segment is checked against its
// alphabet, so nothing encoded (%2F, ..) reaches a lookup, and the dispatch id is valid
// before anything uses it.
func parseRoute(path string) (route, error) {
	rest, ok := strings.CutPrefix(path, remote.RoutePrefix)
	if !ok || len(rest) > 512 {
		return route{}, errBadRoute
	}
	seg := strings.Split(rest, "/")
	if len(seg) < 2 || !wire.ValidDispatchID(seg[0]) {
		return route{}, errBadRoute
	}
	r := route{dispatch: seg[0], kind: seg[1]}
	switch {
	case r.kind == routeSession && len(seg) == 2:
		return r, nil
	case r.kind == routeMounts && len(seg) == 3 && remote.ValidMountName(seg[2]):
		r.name = seg[2]
		return r, nil
	case r.kind == routeFiles && len(seg) == 3:
		i, err := strconv.Atoi(seg[2])
		if err != nil || i < 0 || i >= maxFiles || strconv.Itoa(i) != seg[2] {
			return route{}, errBadRoute
		}
		r.index = i
		return r, nil
	case r.kind == routeStreams && len(seg) == 3 && (seg[2] == "stdout" || seg[2] == "stderr"):
		r.name = seg[2]
		return r, nil
	case r.kind == routeSockets && len(seg) == 4 && remote.ValidMountName(seg[2]) && validSocketName(seg[3]):
		r.name, r.socket = seg[2], seg[3]
		return r, nil
	}
	return route{}, errBadRoute
}

// validSocketName: [A-Za-z0-9._-], 1 to 64 bytes, not "." or "..".
func validSocketName(s string) bool {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
