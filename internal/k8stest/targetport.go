package k8stest

import (
	"encoding/json"
	"fmt"
)

// targetPort is a Service port's targetPort as the API writes it: a number, or the name of a
// container port. The harness links the standard library only (TestStandardLibraryOnly), so
// it reads the field itself rather than through apimachinery's IntOrString.
type targetPort struct {
	num  int
	name string
}

func (p *targetPort) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &p.num); err == nil {
		p.name = ""
		return nil
	}
	p.num = 0
	if err := json.Unmarshal(b, &p.name); err != nil {
		return fmt.Errorf("targetPort %s: neither a number nor a name", b)
	}
	return nil
}
