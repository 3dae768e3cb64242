package kubernetes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestRedTeam28_RESTClusterVerifiesTLS: the provider's own client (e2eeef1, in place of
// client-go's clientset) still verifies the API server's certificate against the configured
// CA: a server whose certificate the CA did not sign, or no CA at all (the system roots), gets
// no request, so never the bearer token; the token is in no error. With the right CA the call
// is made, with the token, over TLS.
func TestRedTeam28_RESTClusterVerifiesTLS(t *testing.T) {
	const token = "rt28-bearer-token-never-shown"
	var sawToken atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+token {
			sawToken.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"agora"}}`))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	defer srv.Close()
	caOf := func(s *httptest.Server) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	}
	// Every httptest server shares one certificate: the other CA is made here.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(28), Subject: pkix.Name{CommonName: "rt28 other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	call := func(ca []byte) error {
		c, err := newRESTCluster(&rest.Config{Host: srv.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CoreV1().Pods("agora").Get(t.Context(), "p", metav1.GetOptions{})
		return err
	}
	for name, ca := range map[string][]byte{"system roots": nil, "another CA": otherCA} {
		err := call(ca)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: got %v, want a certificate verification error", name, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
	if n := sawToken.Load(); n != 0 {
		t.Fatalf("the server saw the token %d times over connections the client should have refused", n)
	}
	if err := call(caOf(srv)); err != nil {
		t.Fatalf("with the server's CA: %v", err)
	}
	if sawToken.Load() != 1 {
		t.Errorf("with the server's CA the token was sent %d times, want 1", sawToken.Load())
	}
}
