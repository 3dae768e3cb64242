package grant

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSet_Narrow(t *testing.T) {
	parent := Set{
		Tools:    []string{"read_file", "list_files", "run_command", "http_fetch"},
		Commands: []string{"echo *", "go  test **"},
		Egress:   rules("api.example.com", "*.github.com"),
	}
	tests := []struct {
		name    string
		child   Set
		want    Set
		wantErr []NarrowError
	}{
		{
			name:  "empty child narrows to nothing",
			child: Set{},
			want:  Set{Tools: []string{}, Commands: []string{}, Egress: []EgressRule{}},
		},
		{
			name:  "equal child",
			child: parent,
			want: Set{
				Tools:    []string{"http_fetch", "list_files", "read_file", "run_command"},
				Commands: []string{"echo *", "go test **"},
				Egress:   rules("*.github.com", "api.example.com"),
			},
		},
		{
			name: "subset normalised",
			child: Set{
				Tools:    []string{"read_file", "read_file"},
				Commands: []string{" go test   ** "},
				Egress:   []EgressRule{{Host: "API.example.com"}, {Host: "raw.github.com"}, {Host: "*.api.github.com"}},
			},
			want: Set{
				Tools:    []string{"read_file"},
				Commands: []string{"go test **"},
				Egress:   rules("*.api.github.com", "api.example.com", "raw.github.com"),
			},
		},
		{
			name:    "widen tool",
			child:   Set{Tools: []string{"read_file", "write_file"}},
			wantErr: []NarrowError{{Kind: "tool", Item: "write_file"}},
		},
		{
			name:    "widen command with a broader pattern",
			child:   Set{Commands: []string{"echo **", "sh -c *"}},
			wantErr: []NarrowError{{Kind: "command", Item: "echo **"}, {Kind: "command", Item: "sh -c *"}},
		},
		{
			name:  "widen egress",
			child: Set{Egress: rules("github.com", "*.example.com", "evil.com", "x.api.example.com")},
			wantErr: []NarrowError{
				{Kind: "egress", Item: "*.example.com"},
				{Kind: "egress", Item: "evil.com"},
				{Kind: "egress", Item: "github.com"},
				{Kind: "egress", Item: "x.api.example.com"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parent.Narrow(tt.child)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Narrow: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Narrow (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("Narrow = %+v, want an error", got)
			}
			var gotErrs []NarrowError
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ne *NarrowError
				if !errors.As(e, &ne) {
					t.Fatalf("error %v is not a *NarrowError", e)
				}
				gotErrs = append(gotErrs, *ne)
			}
			if diff := cmp.Diff(tt.wantErr, gotErrs); diff != "" {
				t.Errorf("Narrow errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSet_NarrowErrorMessage(t *testing.T) {
	_, err := Set{Tools: []string{"read_file"}}.Narrow(Set{Tools: []string{"write_file"}})
	want := `narrow grants: tool "write_file" is not covered by the parent grant`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestHostGranted(t *testing.T) {
	egress := rules("api.example.com", "*.github.com")
	tests := []struct {
		host string
		want bool
	}{
		{"api.example.com", true},
		{"API.Example.COM", true},
		{"example.com", false},
		{"x.api.example.com", false},
		{"github.com", false},
		{"raw.github.com", true},
		{"a.b.github.com", true},
		{"evilgithub.com", false},
		{".github.com", false},
		{"api.example.com.", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := HostGranted(egress, tt.host, 443); got != tt.want {
				t.Errorf("HostGranted(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
}

func TestValidEgress(t *testing.T) {
	label := strings.Repeat("a", 63)
	tests := []struct {
		host string
		want bool
	}{
		{"api.example.com", true},
		{"*.example.com", true},
		{"localhost", true},
		{"a-b.c9", true},
		{label + ".com", true},
		{strings.Repeat(label+".", 4)[:253], true},
		{strings.Repeat(label+".", 4)[:254] + "a", false},
		{label + "a.com", false},
		{"API.example.com", false},
		{"-a.example.com", false},
		{"a-.example.com", false},
		{"*.*.example.com", false},
		{"x.*.example.com", false},
		{"*example.com", false},
		{"example.com.", false},
		{"a..b", false},
		{"10.0.0.1:80", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidEgress(tt.host); got != tt.want {
			t.Errorf("ValidEgress(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestSet_Union(t *testing.T) {
	a := Set{Tools: []string{"read_file"}, Commands: []string{"git status"}}
	b := Set{Tools: []string{"read_file", "run_command"}, Egress: rules("api.example.com")}
	want := Set{Tools: []string{"read_file", "read_file", "run_command"}, Commands: []string{"git status"}, Egress: rules("api.example.com")}
	if diff := cmp.Diff(want, a.Union(b)); diff != "" {
		t.Errorf("Union (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"read_file"}, a.Tools); diff != "" {
		t.Errorf("Union changed its receiver (-want +got):\n%s", diff)
	}
}

// rules parses each string form, for tables.
func rules(ss ...string) []EgressRule {
	out, err := EgressRules(ss...)
	if err != nil {
		panic(err)
	}
	return out
}
