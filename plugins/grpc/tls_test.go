package grpc_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// TestTLSWithCAFileAndServerName: an upstream whose certificate a private CA
// signed for "inventory.internal" answers a client with that CA in ca_file
// and that name in server_name, and no client that trusts only the system's
// roots, or that sends plain text.
func TestTLSWithCAFileAndServerName(t *testing.T) {
	t.Parallel()
	caFile, cert := certificates(t, "inventory.internal")
	target := serveInventory(t, &inventory{}, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	call := func(u jgrpc.Upstream) error {
		// A generous timeout: the first use of the system's roots reads them
		// from disk, which takes a while under the race detector.
		u.Target, u.Attempts, u.Timeout = target, 1, 20*time.Second
		c, err := jgrpc.NewClient(u)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = shoppb.NewInventoryClient(c).GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"})
		return err
	}
	if err := call(jgrpc.Upstream{CAFile: caFile, ServerName: "inventory.internal"}); err != nil {
		t.Fatalf("ca_file and server_name: %v", err)
	}
	if err := call(jgrpc.Upstream{CAFile: caFile}); status.Code(err) != codes.Unavailable {
		t.Fatalf("the certificate does not name 127.0.0.1: err = %v, want UNAVAILABLE", err)
	}
	if err := call(jgrpc.Upstream{ServerName: "inventory.internal"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("system roots only: err = %v, want UNAVAILABLE", err)
	}
	if err := call(jgrpc.Upstream{Insecure: true}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plain text to a TLS server: err = %v, want UNAVAILABLE", err)
	}
}

// certificates writes a CA certificate to a file and returns its path and a
// server certificate the CA signed for name.
func certificates(t *testing.T, name string) (string, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jfast test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}
