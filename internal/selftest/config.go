package selftest

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// copied reports whether a top-level key of agora.yaml is one a target's dispatches depend on
// besides the target itself: the egress proxy's settings and where the worker program is.
// Nothing else of the person's agora.yaml reaches the throw-away home (no callbacks, no
// gateway, no replication).
func copied(key string) bool { return key == "egress" || key == "worker" }

// ConfigWithGateway returns the throw-away home's agora.yaml: target's settings and the copied
// keys as raw (the person's agora.yaml; nil when there is none) has them, byte for byte in
// meaning, with the target's gateway replaced when gateway is not "": the URL a kubernetes
// target's pods reach the throw-away home's own network gateway at, never the person's, whose
// sessions are its home's. An absent target named "local" is the default target, which needs
// no line.
func ConfigWithGateway(raw []byte, target, gateway string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("read agora.yaml: %w", err)
	}
	out := &yaml.Node{Kind: yaml.MappingNode}
	found := false
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			switch {
			case copied(k.Value):
				out.Content = append(out.Content, k, v)
			case k.Value == "targets" && v.Kind == yaml.MappingNode:
				for j := 0; j+1 < len(v.Content); j += 2 {
					if v.Content[j].Value == target {
						found = true
						node := v.Content[j+1]
						if gateway != "" {
							node = withKey(node, "gateway", gateway)
						}
						one := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{v.Content[j], node}}
						out.Content = append(out.Content, k, one)
					}
				}
			}
		}
	}
	if !found && target != "local" {
		return nil, fmt.Errorf("agora.yaml has no target %q", target)
	}
	if !found && gateway != "" {
		return nil, fmt.Errorf("target %q: only a target of agora.yaml reaches a gateway", target)
	}
	if len(out.Content) == 0 {
		return []byte("# the default local target\n"), nil
	}
	return yaml.Marshal(out)
}

// withKey returns a copy of the mapping m with key set to the string value: replaced where m
// has it, else added.
func withKey(m *yaml.Node, key, value string) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: m.Tag, Style: m.Style}
	set := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		v := m.Content[i+1]
		if m.Content[i].Value == key {
			v, set = &yaml.Node{Kind: yaml.ScalarNode, Value: value}, true
		}
		out.Content = append(out.Content, m.Content[i], v)
	}
	if !set {
		out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &yaml.Node{Kind: yaml.ScalarNode, Value: value})
	}
	return out
}
