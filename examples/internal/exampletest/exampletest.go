// Package exampletest is what the examples' tests share: a private database
// on the machine's PostgreSQL per test package, the example's own jfast.toml
// with a few values replaced, and bearer tokens signed like the examples'
// development ones.
package exampletest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
)

// AdminURL reaches the machine's PostgreSQL (trust authentication), to make and
// drop the private databases.
const AdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Secret, Issuer and Audience are the examples' development [plugin.auth]
// values (examples/*/jfast.toml): a token signed here is one their services accept.
const (
	Secret   = "jfast-examples-development-secret-0123456789"
	Issuer   = "jfast-examples"
	Audience = "shop"
)

// Database makes a database named prefix_<random> and returns its URL and a
// function that drops it (WITH FORCE, so open pools do not keep it).
func Database(prefix string) (url string, drop func() error, err error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL)
	if err != nil {
		return "", nil, fmt.Errorf("the examples' tests need the machine's PostgreSQL at 127.0.0.1:5432: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, AdminURL)
		if err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		defer admin.Close(ctx)
		_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return err
	}
	return "postgres://postgres@127.0.0.1:5432/" + name + "?sslmode=disable", drop, nil
}

// Config returns the jfast.toml at path with each old, new pair of replace
// applied; an old text that is not in the file fails the test, so the tests
// follow the file as it changes.
func Config(t testing.TB, path string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("%s has no %q to replace", path, replace[i])
		}
		text = strings.ReplaceAll(text, replace[i], replace[i+1])
	}
	return text
}

// Token returns a bearer token for subject, valid for an hour.
func Token(t testing.TB, subject string) string {
	t.Helper()
	now := time.Now()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   subject,
		Issuer:    Issuer,
		Audience:  jwt.ClaimStrings{Audience},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}).SignedString([]byte(Secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// OrderToken returns the token orders signs to vouch that order id, for
// amountMinor in currency, is subject's (billing's Order-Token header).
func OrderToken(t testing.TB, subject string, id, amountMinor int64, currency string) string {
	t.Helper()
	now := time.Now()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": subject, "iss": Issuer, "aud": Audience,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"order_id": strconv.FormatInt(id, 10), "amount_minor": strconv.FormatInt(amountMinor, 10), "currency": currency,
	}).SignedString([]byte(Secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Bearer is the Authorization header pair for jfasttest's Do and Get.
func Bearer(t testing.TB, subject string) []string {
	return []string{"Authorization", "Bearer " + Token(t, subject)}
}

// JSON adds the Content-Type of a JSON body to headers, for jfasttest's Do: the
// examples decode bodies with framework.DecodeJSON, which refuses any other
// (415).
func JSON(headers ...string) []string {
	return append([]string{"Content-Type", "application/json"}, headers...)
}
