package s3_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/s3"
)

// FuzzParseRetention: a server's retention reply never panics the parser, and an accepted one
// has a known mode.
func FuzzParseRetention(f *testing.F) {
	f.Add([]byte(`<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>2027-11-24T12:00:00Z</RetainUntilDate></Retention>`))
	f.Add([]byte(`<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>2027-11-24T12:00:00+02:00</RetainUntilDate></Retention> `))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := s3.ParseRetention(b)
		if err == nil && l.Mode != "COMPLIANCE" && l.Mode != "GOVERNANCE" {
			t.Fatalf("accepted mode %q", l.Mode)
		}
	})
}

// FuzzParseList: a list page never panics the parser nor carries more than 1,000 keys.
func FuzzParseList(f *testing.F) {
	f.Add([]byte(`<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a/b</Key></Contents></ListBucketResult>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := s3.ParseList(b)
		if err == nil && len(p.Keys) > 1000 {
			t.Fatalf("%d keys", len(p.Keys))
		}
	})
}

// FuzzParseCredentials: a credentials file never panics the parser, and an accepted one has
// both keys without spaces.
func FuzzParseCredentials(f *testing.F) {
	f.Add([]byte("AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\n"))
	f.Add([]byte("# c\n\nAWS_ACCESS_KEY_ID = a\nAWS_SECRET_ACCESS_KEY=b\nAWS_SESSION_TOKEN=t\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := s3.ParseCredentials(b)
		if err == nil && (c.AccessKeyID == "" || c.SecretAccessKey == "") {
			t.Fatal("accepted without both keys")
		}
	})
}

// FuzzParseVersions: a versions reply never panics the parser nor carries more than 1,000
// entries (verify --anchor-bucket reads it from the auditor's endpoint).
func FuzzParseVersions(f *testing.F) {
	f.Add([]byte(`<ListVersionsResult><IsTruncated>false</IsTruncated><Version><Key>a/b</Key><VersionId>1</VersionId></Version><DeleteMarker><Key>a/b</Key><VersionId>2</VersionId></DeleteMarker></ListVersionsResult>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := s3.ParseVersions(b)
		if err == nil && len(p.Versions) > 1000 {
			t.Fatalf("%d entries", len(p.Versions))
		}
	})
}

// FuzzParseObjectLockConfiguration: a bucket's Object Lock reply never panics the parser
// (doctor reads it from the configured endpoint).
func FuzzParseObjectLockConfiguration(f *testing.F) {
	f.Add([]byte(`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s3.ParseObjectLockConfiguration(b)
	})
}
