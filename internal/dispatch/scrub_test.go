package dispatch

import "testing"

func TestNamesPath(t *testing.T) {
	tests := []struct {
		b, path string
		want    bool
	}{
		{"[remote \"origin\"]\n\turl = /srv/src\n", "/srv/src", true},
		{"0000 1111 a <a@b> 1 +0000\tclone: from /srv/src\n", "/srv/src", true},
		{"/srv/src", "/srv/src", true},
		{"url=\"/srv/src\"", "/srv/src", true},
		{"abc refs/heads/lib/src\n", "/src", false},
		{"abc refs/heads/lib/src\n\turl = /src\n", "/src", true},
		{"nothing here", "/srv/src", false},
	}
	for _, tt := range tests {
		if got := namesPath([]byte(tt.b), tt.path); got != tt.want {
			t.Errorf("namesPath(%q, %q) = %v, want %v", tt.b, tt.path, got, tt.want)
		}
	}
}
