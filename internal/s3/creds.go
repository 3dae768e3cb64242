package s3

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// maxCredentialsFile caps a credentials file.
const maxCredentialsFile = 8 << 10

// Credentials sign requests. They are never formatted: String and GoString say "redacted".
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

func (Credentials) String() string   { return "s3.Credentials{redacted}" }
func (Credentials) GoString() string { return "s3.Credentials{redacted}" }

func (c Credentials) validate() error {
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return errors.New("s3 credentials: need an access key id and a secret access key (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or credentials_file)")
	}
	return nil
}

// LoadCredentials reads the credentials: from file when it is set (an absolute path to a
// file of KEY=value lines, as [ParseCredentials] reads), else from the environment's
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. Never from agora.yaml.
func LoadCredentials(file string, getenv func(string) string) (Credentials, error) {
	if file == "" {
		c := Credentials{AccessKeyID: getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: getenv("AWS_SESSION_TOKEN")}
		return c, c.validate()
	}
	// O_NONBLOCK: a FIFO named here is refused below instead of hanging the command.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Credentials{}, fmt.Errorf("s3 credentials file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Credentials{}, fmt.Errorf("s3 credentials file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Credentials{}, fmt.Errorf("s3 credentials file %s is not a regular file", file)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Credentials{}, fmt.Errorf("s3 credentials file %s has mode %04o: it holds a secret, run chmod 600", file, st.Mode().Perm())
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxCredentialsFile+1)); err != nil {
		return Credentials{}, fmt.Errorf("s3 credentials file: %w", err)
	}
	if buf.Len() > maxCredentialsFile {
		return Credentials{}, fmt.Errorf("s3 credentials file %s is over %d bytes", file, maxCredentialsFile)
	}
	c, err := ParseCredentials(buf.Bytes())
	if err != nil {
		return Credentials{}, fmt.Errorf("s3 credentials file %s: %w", file, err)
	}
	return c, nil
}

// ParseCredentials reads KEY=value lines: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// optionally AWS_SESSION_TOKEN; blank lines and lines starting with '#' are skipped. An
// unknown or repeated key is refused, by line number: the value is never echoed.
func ParseCredentials(b []byte) (Credentials, error) {
	var c Credentials
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1024), maxCredentialsFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return Credentials{}, fmt.Errorf("line %d: want KEY=value", n)
		}
		if seen[k] {
			return Credentials{}, fmt.Errorf("line %d: %s given twice", n, k)
		}
		seen[k] = true
		for i := 0; i < len(v); i++ {
			if v[i] <= ' ' || v[i] > '~' {
				return Credentials{}, fmt.Errorf("line %d: the value of %s holds a space or a non-ASCII byte", n, k)
			}
		}
		switch k {
		case "AWS_ACCESS_KEY_ID":
			c.AccessKeyID = v
		case "AWS_SECRET_ACCESS_KEY":
			c.SecretAccessKey = v
		case "AWS_SESSION_TOKEN":
			c.SessionToken = v
		default:
			return Credentials{}, fmt.Errorf("line %d: unknown key (want AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)", n)
		}
	}
	if err := sc.Err(); err != nil {
		return Credentials{}, fmt.Errorf("read: %w", err)
	}
	return c, c.validate()
}
