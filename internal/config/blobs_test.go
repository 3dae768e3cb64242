package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

func TestParse_S3(t *testing.T) {
	good := "blobs:\n  s3: {endpoint: \"https://s3.example.com\", bucket: b1, prefix: p/}\naudit:\n  anchors:\n    - s3: {endpoint: \"https://s3.example.com\", bucket: audit, retention: 365d}\n"
	c := config.Default("/home")
	if err := config.Parse("agora.yaml", []byte(good), c); err != nil {
		t.Fatal(err)
	}
	if c.Blobs.S3 == nil || c.Blobs.S3.Bucket != "b1" || c.Audit.Anchors[0].Type != config.AnchorS3 {
		t.Errorf("got %+v %+v", c.Blobs, c.Audit.Anchors)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"blobs: {s3: {endpoint: \"https://AKID:secret@s3.example.com\", bucket: b}}", "must not carry userinfo"},
		{"blobs: {s3: {endpoint: \"https://s3.example.com/b\", bucket: b}}", "scheme and host only"},
		{"blobs: {s3: {endpoint: \"https://s3.example.com\"}}", "a bucket name is required"},
		{"blobs: {s3: {endpoint: \"https://s3.example.com\", bucket: b, retention: 1d}}", "not to blobs"},
		{"blobs: {s3: {endpoint: \"https://s3.example.com\", bucket: b, credentials_file: creds}}", "absolute path"},
		{"blobs: {s3: {endpoint: \"https://s3.example.com\", bucket: b, secret_access_key: x}}", "secret_access_key"},
		{"audit: {anchors: [{s3: {endpoint: \"https://s3.example.com\", bucket: b}}]}", "want whole days"},
		{"audit: {anchors: [{s3: {endpoint: \"https://s3.example.com\", bucket: b, retention: 0d}}]}", "want 1d to"},
		{"audit: {anchors: [{type: file, path: /x, s3: {endpoint: \"https://s3.example.com\", bucket: b, retention: 1d}}]}", "takes only path"},
	} {
		err := config.Parse("agora.yaml", []byte(tt.yaml), config.Default("/home"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.yaml, err, tt.want)
		} else if strings.Contains(err.Error(), "secret@") {
			t.Errorf("error repeats the endpoint's userinfo: %v", err)
		}
	}
}

func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"365d", "1d", "0d", "36501d", "d", "1h", "-1d", "٣d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := config.ParseRetention(s)
		if err == nil && (d < 24*time.Hour || d > 36500*24*time.Hour) {
			t.Fatalf("%q gave %v", s, d)
		}
	})
}
