package verify

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// MaxTokenSize caps an RFC 3161 timestamp token.
const MaxTokenSize = 64 << 10

// ErrNoTSARoot is returned by [CheckTimestamp] when it has no trusted root to check the TSA's
// certificate chain against: a token whose signer cannot be traced to a root proves nothing.
var ErrNoTSARoot = errors.New("no trusted TSA root certificate")

// CheckTimestamp verifies an RFC 3161 TimeStampToken (DER) over data and returns the time it
// attests. It checks, in order: one signer whose certificate is embedded; the CMS signature;
// the message imprint is SHA-256(data); and the signer's certificate chains to roots at the
// attested time, with id-kp-timeStamping as its one critical extended key usage. The nonce is the requester's
// to check (the token alone cannot say which request it answered).
func CheckTimestamp(token, data []byte, roots *x509.CertPool) (at time.Time, err error) {
	if len(token) > MaxTokenSize {
		return time.Time{}, fmt.Errorf("check timestamp: token larger than %d bytes", MaxTokenSize)
	}
	defer func() {
		// The token is untrusted and the ASN.1 parsers below are third-party code.
		if r := recover(); r != nil {
			at, err = time.Time{}, errors.New("check timestamp: malformed token")
		}
	}()
	p7, err := pkcs7.Parse(token)
	if err != nil {
		return time.Time{}, fmt.Errorf("check timestamp: parse token: %v", err)
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		return time.Time{}, errors.New("check timestamp: want exactly one signer with its certificate embedded")
	}
	if err := p7.Verify(); err != nil {
		return time.Time{}, fmt.Errorf("check timestamp: signature: %v", err)
	}
	ts, err := timestamp.Parse(token)
	if err != nil {
		return time.Time{}, fmt.Errorf("check timestamp: %v", err)
	}
	sum := sha256.Sum256(data)
	if ts.HashAlgorithm != crypto.SHA256 || !bytes.Equal(ts.HashedMessage, sum[:]) {
		return time.Time{}, fmt.Errorf("check timestamp: message imprint is not SHA-256 of the checkpoint (got %x)", ts.HashedMessage)
	}
	if err := checkTSAUsage(signer); err != nil {
		return time.Time{}, fmt.Errorf("check timestamp: TSA certificate %q: %v", truncate(signer.Subject.String(), 80), err)
	}
	if roots == nil {
		return time.Time{}, fmt.Errorf("check timestamp: %w", ErrNoTSARoot)
	}
	inter := x509.NewCertPool()
	for _, c := range p7.Certificates {
		if c != signer {
			inter.AddCert(c)
		}
	}
	_, err = signer.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   ts.Time,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping},
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("check timestamp: TSA certificate %q: %v", truncate(signer.Subject.String(), 80), err)
	}
	return ts.Time.UTC(), nil
}

var oidExtKeyUsage = asn1.ObjectIdentifier{2, 5, 29, 37}

// checkTSAUsage applies RFC 3161 section 2.3: the TSA's certificate MUST carry exactly one
// extended key usage, id-kp-timeStamping, in a critical extension. (x509 verification alone
// accepts a certificate with no extended key usage at all.)
func checkTSAUsage(c *x509.Certificate) error {
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageTimeStamping || len(c.UnknownExtKeyUsage) != 0 {
		return errors.New("extended key usage is not exactly id-kp-timeStamping")
	}
	for _, e := range c.Extensions {
		if e.Id.Equal(oidExtKeyUsage) && !e.Critical {
			return errors.New("extended key usage extension is not critical")
		}
	}
	return nil
}

// CertPool returns a pool of the DER certificates ders.
func CertPool(ders [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	for i, d := range ders {
		c, err := x509.ParseCertificate(d)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", i, err)
		}
		pool.AddCert(c)
	}
	return pool, nil
}
