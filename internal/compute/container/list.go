package container

import (
	"context"
	"time"

	"github.com/moby/moby/client"
)

// listTries is how many times listContainers asks. Podman's Docker API fails a whole list
// when a listed container's process exits while it reads the process's cgroup ("read
// /proc/N/cgroup: no such process"); asking again a moment later sees the container ended.
// A list changes nothing, so asking again is safe.
const listTries = 5

// listContainers is ContainerList asked again on an error, a short pause between tries, for
// the daemon's race above. It returns the last error when every try failed.
func listContainers(ctx context.Context, cli *client.Client, opts client.ContainerListOptions) (client.ContainerListResult, error) {
	var err error
	for i := 0; i < listTries; i++ {
		var res client.ContainerListResult
		if res, err = cli.ContainerList(ctx, opts); err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(time.Duration(i+1) * 50 * time.Millisecond):
		}
	}
	return client.ContainerListResult{}, err
}
