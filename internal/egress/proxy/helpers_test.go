package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
)

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

func tlsClient(c net.Conn, host string, roots *x509.CertPool) *tls.Conn {
	return tls.Client(c, &tls.Config{ServerName: host, RootCAs: roots})
}
