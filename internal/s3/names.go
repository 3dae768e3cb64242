package s3

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Validate checks a Config without contacting anything.
func (c Config) Validate() error {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("s3 endpoint: want an http or https URL, e.g. https://s3.eu-west-1.amazonaws.com")
	}
	if u.User != nil {
		return errors.New("s3 endpoint: must not carry userinfo (credentials come from the environment or credentials_file)")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("s3 endpoint: want scheme and host only (agora uses path-style requests: endpoint/bucket/key)")
	}
	if err := CheckBucketName(c.Bucket); err != nil {
		return err
	}
	if err := CheckPrefix(c.Prefix); err != nil {
		return err
	}
	for _, r := range c.Region {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("s3 region %q: want lowercase letters, digits and '-'", c.Region)
		}
	}
	return nil
}

// CheckBucketName accepts S3's bucket names: 3 to 63 lowercase letters, digits, '.' and '-',
// starting and ending with a letter or digit.
func CheckBucketName(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("s3 bucket %q: want 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && ((c != '.' && c != '-') || i == 0 || i == len(b)-1) {
			return fmt.Errorf("s3 bucket %q: want lowercase letters, digits, '.' and '-', starting and ending with a letter or digit", b)
		}
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("s3 bucket %q: no two dots in a row", b)
	}
	return nil
}

// CheckPrefix accepts "" or slash-separated segments of [A-Za-z0-9._-], none "." or "..",
// with an optional trailing "/": a prefix cannot climb out of itself, and a key never needs
// escaping, so what is signed is what the server stores.
func CheckPrefix(p string) error {
	if p == "" {
		return nil
	}
	if err := checkPath(strings.TrimSuffix(p, "/")); err != nil {
		return fmt.Errorf("s3 prefix %q: %w", truncate(p, 80), err)
	}
	return nil
}

// checkName accepts an object name under the prefix: the same grammar as a prefix.
func checkName(n string) error {
	if err := checkPath(n); err != nil {
		return fmt.Errorf("s3 object name %q: %w", truncate(n, 80), err)
	}
	return nil
}

func checkPath(p string) error {
	if p == "" || len(p) > 512 {
		return errors.New("want 1 to 512 characters")
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New("empty, '.' or '..' segment")
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return fmt.Errorf("character %q is not allowed (want letters, digits, '.', '_', '-' and '/')", c)
			}
		}
	}
	return nil
}

func normPrefix(p string) string {
	if p == "" || strings.HasSuffix(p, "/") {
		return p
	}
	return p + "/"
}
