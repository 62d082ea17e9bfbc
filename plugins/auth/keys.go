package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// keys is what Validate loaded from the configuration.
type keys struct {
	family     family   // hmac and public_key modes; "" in jwks mode (each JWK decides)
	algorithms []string // the allow-list, all of family
	secret     []byte   // hmac
	public     crypto.PublicKey
	signing    any // []byte or a crypto.Signer when issuing is possible
}

type signer interface {
	Public() crypto.PublicKey
}

// readPEM returns the first PEM block of value: the value itself when it
// holds a PEM block, else the file it names. Errors never quote the value (it
// may be a key).
func readPEM(value string) (*pem.Block, error) {
	text := []byte(value)
	if !strings.Contains(value, "-----BEGIN") {
		b, err := os.ReadFile(value)
		if err != nil {
			return nil, fmt.Errorf("is neither inline PEM nor a readable file: %w", errors.Unwrap(err))
		}
		text = b
	}
	block, _ := pem.Decode(text)
	if block == nil {
		return nil, errors.New("holds no PEM block")
	}
	return block, nil
}

func loadPublicKey(value string) (crypto.PublicKey, error) {
	block, err := readPEM(value)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PublicKey(block.Bytes); err == nil {
		return k, nil
	}
	if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
		return cert.PublicKey, nil
	}
	return nil, fmt.Errorf("PEM block %q is not a public key (PKIX, PKCS #1) or a certificate", block.Type)
}

func loadPrivateKey(value string) (signer, error) {
	block, err := readPEM(value)
	if err != nil {
		return nil, err
	}
	var k any
	if k, err = x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		if k, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			if k, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
				return nil, fmt.Errorf("PEM block %q is not a private key (PKCS #8, PKCS #1, SEC 1)", block.Type)
			}
		}
	}
	switch k := k.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return k.(signer), nil
	}
	return nil, fmt.Errorf("is a %T; use an RSA, ECDSA or Ed25519 key", k)
}

// keyFamily is the family a verification key decides.
func keyFamily(k crypto.PublicKey) (family, error) {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return familyRSA, nil
	case *ecdsa.PublicKey:
		if ecdsaAlgorithm(k) == "" {
			return "", fmt.Errorf("is an ECDSA key on an unsupported curve %s", k.Curve.Params().Name)
		}
		return familyECDSA, nil
	case ed25519.PublicKey:
		return familyEd25519, nil
	case []byte:
		return familyHMAC, nil
	}
	return "", fmt.Errorf("is a %T key, which signs no JWT algorithm", k)
}

func ecdsaAlgorithm(k *ecdsa.PublicKey) string {
	switch k.Curve {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	case elliptic.P521():
		return "ES512"
	}
	return ""
}

// keyAlgorithms lists the algorithms a public key can verify: the key type, and
// for ECDSA the curve, decide.
func keyAlgorithms(k crypto.PublicKey) []string {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		if a := ecdsaAlgorithm(k); a != "" {
			return []string{a}
		}
	case ed25519.PublicKey:
		return []string{"EdDSA"}
	}
	return nil
}

// keyFits reports whether key may verify a token signed with alg: the key's type
// decides, so an HS256 token can never be checked against a public key used as an
// HMAC secret, nor an ES384 token against a P-256 key.
func keyFits(key any, alg string) bool {
	switch k := key.(type) {
	case []byte:
		return algorithmFamily[alg] == familyHMAC
	case *rsa.PublicKey:
		return algorithmFamily[alg] == familyRSA
	case *ecdsa.PublicKey:
		return ecdsaAlgorithm(k) == alg
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

func samePublicKey(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
