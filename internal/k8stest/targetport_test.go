package k8stest

import (
	"encoding/json"
	"testing"
)

func TestTargetPort_NumberOrName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want targetPort
		bad  bool
	}{
		{in: `8443`, want: targetPort{num: 8443}},
		{in: `"gateway"`, want: targetPort{name: "gateway"}},
		{in: `null`, want: targetPort{}},
		{in: `{"x":1}`, bad: true},
		{in: `8443.5`, bad: true},
	} {
		var p targetPort
		err := json.Unmarshal([]byte(tc.in), &p)
		if (err != nil) != tc.bad || (!tc.bad && p != tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v (error %v)", tc.in, p, err, tc.want, tc.bad)
		}
	}
	pods := []readyPod{{ip: "10.0.0.2", ports: map[string]int{"gateway": 8443}}}
	if got := endpoint(pods, targetPort{name: "gateway"}, 443); got != "10.0.0.2:8443" {
		t.Errorf("named target port: %q", got)
	}
	if got := endpoint(pods, targetPort{name: "other"}, 443); got != "" {
		t.Errorf("unknown named port: %q, want none", got)
	}
	if got := endpoint(pods, targetPort{}, 443); got != "10.0.0.2:443" {
		t.Errorf("no target port: %q, want the Service's port", got)
	}
}
