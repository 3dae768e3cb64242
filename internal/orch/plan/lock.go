package plan

import (
	"reflect"
	"strconv"

	yaml "go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// lockDoc is a lock as written: a bare name (exclusive) or {name, mode}.
type lockDoc struct {
	Name string
	Mode string // "" when not written
	bare bool
}

// UnmarshalStrictYAML decodes a bare string or a {name, mode} mapping.
func (l *lockDoc) UnmarshalStrictYAML(d *strictyaml.Decoder, n *yaml.Node, path string) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		l.Name, l.bare = n.Value, true
	case n.Kind == yaml.MappingNode:
		var m struct {
			Name string `yaml:"name"`
			Mode string `yaml:"mode"`
		}
		d.Decode(n, reflect.ValueOf(&m).Elem(), path)
		l.Name, l.Mode = m.Name, m.Mode
	default:
		d.Errorf(n, path, "want a lock name or {name: NAME, mode: exclusive|shared}, got %s", describe(n))
	}
}

// describe names a node's kind for the lock message.
func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return "null"
	}
	return "something else"
}

// locks checks a task's locks and expands bare names to exclusive locks.
func (v *validator) locks(path string, docs []lockDoc) []Lock {
	if len(docs) > MaxLocks {
		v.add(path, "%d locks; at most %d", len(docs), MaxLocks)
		return nil
	}
	if len(docs) == 0 {
		return nil
	}
	locks := make([]Lock, len(docs))
	for k, l := range docs {
		lp := path + "[" + strconv.Itoa(k) + "]"
		namePath := lp
		if !l.bare {
			namePath = lp + ".name"
		}
		switch {
		case l.Name == "" && !l.bare:
			v.add(namePath, "required")
		case !lockNamePattern().MatchString(l.Name):
			v.add(namePath, "invalid lock name %q: use 1-128 lowercase letters, digits, '.', '_', '/', ':' or '-', starting with a letter or digit", l.Name)
		}
		mode, valid := l.Mode, true
		switch mode {
		case "", LockExclusive:
			mode = LockExclusive // the constant, not the decoded copy each task would keep
		case LockShared:
			mode = LockShared
		default:
			v.add(lp+".mode", "want %s or %s, got %q", LockExclusive, LockShared, mode)
			valid = false
		}
		locks[k] = Lock{Name: v.name(l.Name), Mode: mode}
		if !valid || l.Name == "" {
			continue
		}
		for j, prev := range locks[:k] {
			if prev.Name == l.Name && prev.Mode != mode && (prev.Mode == LockExclusive || prev.Mode == LockShared) {
				v.add(namePath, "lock %q is also listed as %s at locks[%d]; a task holds a lock in one mode", l.Name, prev.Mode, j)
				break
			}
		}
	}
	return locks
}
