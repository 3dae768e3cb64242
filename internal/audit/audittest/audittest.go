// Package audittest builds real fixtures for tests of the audit log: fresh signed-note keys
// and a local RFC 3161 time-stamping authority served on 127.0.0.1. Nothing else imports it;
// it never contacts a real address.
package audittest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitorus/timestamp"
	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/egress"
)

// NewKey returns a fresh audit signer and its verifier key, named like an agora instance's
// key: "agora/<hex>".
func NewKey(tb testing.TB) (note.Signer, string) {
	tb.Helper()
	skey, vkey := NewKeyText(tb)
	s, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	return s, vkey
}

// NewKeyText returns a fresh audit key pair as signed-note key texts (private, public).
func NewKeyText(tb testing.TB) (string, string) {
	tb.Helper()
	var id [8]byte
	rand.Read(id[:])
	skey, vkey, err := note.GenerateKey(rand.Reader, "agora/"+hex.EncodeToString(id[:]))
	if err != nil {
		tb.Fatal(err)
	}
	return skey, vkey
}

// LoopbackPolicy is the egress policy that lets a test reach servers on 127.0.0.1.
var LoopbackPolicy = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// TSA is a time-stamping authority for tests: a CA, a TSA certificate it issued with the
// time-stamping key usage, and an HTTP server answering RFC 3161 requests.
type TSA struct {
	// URL is where to POST requests.
	URL string
	// CAPEM is the CA certificate in PEM, as an operator's ca_file would hold it.
	CAPEM []byte
	// Pool holds the CA certificate.
	Pool *x509.CertPool
	// Requests counts the requests answered.
	Requests atomic.Int64
	// WrongNonce, when set, makes the TSA answer with another nonce.
	WrongNonce atomic.Bool
	// Status, when not zero, makes the TSA answer with that HTTP status.
	Status atomic.Int32

	key  crypto.Signer
	cert *x509.Certificate
}

// NewTSA starts a TSA; it stops when the test ends.
func NewTSA(tb testing.TB) *TSA { return newTSA(tb, certTSA) }

// NewTSAWithoutEKU starts a TSA whose certificate lacks the time-stamping extended key usage,
// which verifiers MUST refuse.
func NewTSAWithoutEKU(tb testing.TB) *TSA { return newTSA(tb, certNoEKU) }

// NewTSANonCriticalEKU starts a TSA whose time-stamping extended key usage is not marked
// critical, which RFC 3161 forbids.
func NewTSANonCriticalEKU(tb testing.TB) *TSA { return newTSA(tb, certNonCritical) }

// Stamp returns a TimeStampToken over data, as the TSA would answer a request for it.
func (t *TSA) Stamp(tb testing.TB, data []byte) []byte {
	tb.Helper()
	sum := sha256.Sum256(data)
	ts := timestamp.Timestamp{HashAlgorithm: crypto.SHA256, HashedMessage: sum[:], Time: time.Now().UTC().Truncate(time.Second),
		Policy: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, AddTSACertificate: true}
	resp, err := ts.CreateResponseWithOpts(t.cert, t.key, crypto.SHA256)
	if err != nil {
		tb.Fatal(err)
	}
	parsed, err := timestamp.ParseResponse(resp)
	if err != nil {
		tb.Fatal(err)
	}
	return parsed.RawToken
}

func newTSA(tb testing.TB, kind certKind) *TSA {
	tb.Helper()
	caKey, caCert := newCert(tb, certRoot, nil, nil)
	tsaKey, tsaCert := newCert(tb, kind, caCert, caKey)
	t := &TSA{Pool: x509.NewCertPool(), key: tsaKey, cert: tsaCert}
	t.Pool.AddCert(caCert)
	t.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := t.Status.Load(); s != 0 {
			http.Error(w, "refused", int(s))
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		req, err := timestamp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		nonce := req.Nonce
		if t.WrongNonce.Load() {
			nonce = new(big.Int).Add(nonce, big.NewInt(1))
		}
		ts := timestamp.Timestamp{
			HashAlgorithm:     req.HashAlgorithm,
			HashedMessage:     req.HashedMessage,
			Time:              time.Now().UTC().Truncate(time.Second),
			Nonce:             nonce,
			Policy:            asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1},
			AddTSACertificate: req.Certificates,
		}
		resp, err := ts.CreateResponseWithOpts(tsaCert, tsaKey, crypto.SHA256)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		t.Requests.Add(1)
		w.Header().Set("Content-Type", "application/timestamp-reply")
		w.Write(resp)
	}))
	tb.Cleanup(srv.Close)
	t.URL = srv.URL + "/tsr"
	return t
}

type certKind string

const (
	certRoot  certKind = "agora test TSA root"
	certTSA   certKind = "agora test TSA"
	certNoEKU certKind = "agora test TSA without time-stamping EKU"

	certNonCritical certKind = "agora test TSA with a non-critical EKU"
)

func newCert(tb testing.TB, kind certKind, parent *x509.Certificate, parentKey crypto.Signer) (*ecdsa.PrivateKey, *x509.Certificate) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: string(kind)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	switch kind {
	case certRoot:
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	case certNoEKU:
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	case certNonCritical:
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}
	default:
		// RFC 3161 section 2.3: the one extended key usage, marked critical.
		eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
		if err != nil {
			tb.Fatal(err)
		}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: eku}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return key, cert
}
