package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files the control plane needs: a throwaway cluster CA, the API server's serving
// certificate signed by it, and the ServiceAccount token signing key. Everything is generated at
// start, so nothing secret is ever committed and every run has fresh credentials.
type pki struct {
	CAFile, CertFile, KeyFile string
	SAKeyFile, SAPubFile      string
	CAPEM                     []byte
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n.Add(n, big.NewInt(1))
}

func generatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		CAFile:    filepath.Join(dir, "ca.crt"),
		CertFile:  filepath.Join(dir, "apiserver.crt"),
		KeyFile:   filepath.Join(dir, "apiserver.key"),
		SAKeyFile: filepath.Join(dir, "sa.key"),
		SAPubFile: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now().Add(-time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "devcluster-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("ca cert: %w", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(p.CAFile, p.CAPEM, 0o644); err != nil {
		return nil, err
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now,
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("serving cert: %w", err)
	}
	if err := writePEM(p.CertFile, "CERTIFICATE", srvDER); err != nil {
		return nil, err
	}
	srvKeyDER, _ := x509.MarshalECPrivateKey(srvKey)
	if err := writePEM(p.KeyFile, "EC PRIVATE KEY", srvKeyDER); err != nil {
		return nil, err
	}

	// ServiceAccount tokens are signed with RS256 (what every JWT consumer understands).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.SAKeyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err := writePEM(p.SAPubFile, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	return p, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
