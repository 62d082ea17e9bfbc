package mail

import "crypto/x509"

// SetRootCAs makes p trust roots (a test server's self-signed certificate)
// instead of the system pool. Call it before the App starts.
func SetRootCAs(p *Plugin, roots *x509.CertPool) { p.roots = roots }
