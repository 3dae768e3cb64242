package view

import (
	"context"
	"fmt"

	"github.com/agora-dev/agora/internal/catalog"
)

// Overlays lists each pinned capability's name with the files its overlay: patterns place
// in the workspace ([catalog.OverlayFiles]), in pins' order. Only a capability that
// declares patterns has its archive read.
func (c *Catalog) Overlays(ctx context.Context, pins []catalog.Pin) (names []string, files [][]string, err error) {
	for _, pin := range pins {
		v, err := c.Resolve(ctx, catalog.KindCapability, pin.Name+"@"+string(pin.Digest))
		if err != nil {
			return nil, nil, err
		}
		var paths []string
		if g := v.Meta.CapabilityDoc; g != nil && len(g.Overlay) > 0 {
			data, err := c.Content(v)
			if err != nil {
				return nil, nil, err
			}
			archive, err := catalog.ReadStored(data)
			if err != nil {
				return nil, nil, fmt.Errorf("capability %q: %w", v.Name, err)
			}
			paths = catalog.OverlayFiles(*g, archive)
		}
		names, files = append(names, v.Name), append(files, paths)
	}
	return names, files, nil
}
