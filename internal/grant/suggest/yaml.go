package suggest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
)

// YAML returns the proposal as capability.yaml. Every scalar is a JSON string (valid YAML,
// escapes and all), so nothing from the evidence can end a line or start a key; and the file is
// read back by the catalog's own parser, as `agora capability register` reads it, and must
// give exactly the proposed grant, or it is not returned.
func (p *Proposal) YAML() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Proposed by 'agora capability suggest'. Review it, then register it:\n")
	b.WriteString("#   agora capability register NAME --from DIR\n")
	fmt.Fprintf(&b, "description: %s\n", q(fmt.Sprintf("proposed from %d dispatches by agora capability suggest", p.Dispatches)))
	list(&b, "tools", p.Grant.Tools)
	list(&b, "commands", p.Grant.Commands)
	if len(p.Grant.Egress) == 0 {
		b.WriteString("egress: []\nnetwork: \"none\"\n")
	} else {
		b.WriteString("egress:\n")
		for _, r := range p.Grant.Egress {
			fmt.Fprintf(&b, "  - host: %s\n", q(r.Host))
			if r.Port != 0 {
				fmt.Fprintf(&b, "    port: %d\n", r.Port)
			}
			if len(r.Methods) > 0 {
				fmt.Fprintf(&b, "    methods: %s\n", flow(r.Methods))
			}
			if len(r.Paths) > 0 {
				fmt.Fprintf(&b, "    paths: %s\n", flow(r.Paths))
			}
		}
		b.WriteString("network: \"egress\"\n")
	}
	if len(p.Grant.Approve) > 0 {
		b.WriteString("approve:\n")
		for _, r := range p.Grant.Approve {
			if r.Command != "" {
				fmt.Fprintf(&b, "  - command: %s\n", q(r.Command))
			} else {
				fmt.Fprintf(&b, "  - %s\n", q(r.Tool))
			}
		}
	}
	doc, err := catalog.ParseCapabilityDoc(catalog.CapabilityFile, b.Bytes(), nil)
	if err != nil {
		return nil, fmt.Errorf("the proposed capability.yaml does not read back: %w", err)
	}
	back, err := doc.Set.Narrow(doc.Set)
	if err != nil || !sameSet(back, p.Grant) {
		return nil, fmt.Errorf("the proposed capability.yaml reads back as another grant; nothing was written")
	}
	return b.Bytes(), nil
}

func sameSet(a, b grant.Set) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb) && reflect.DeepEqual(a.Tools, b.Tools)
}

func list(b *bytes.Buffer, key string, ss []string) {
	if len(ss) == 0 {
		fmt.Fprintf(b, "%s: []\n", key)
		return
	}
	fmt.Fprintf(b, "%s:\n", key)
	for _, s := range ss {
		fmt.Fprintf(b, "  - %s\n", q(s))
	}
}

func flow(ss []string) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q(s))
	}
	b.WriteByte(']')
	return b.String()
}

// q quotes s as a JSON string, which YAML reads as a double-quoted scalar.
func q(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
