package oidctest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// TestProvider: the provider refuses an authorization request without PKCE, refuses a code
// with the wrong verifier, and issues ID tokens that verify against its discovered keys, with
// the nonce and the user's claims.
func TestProvider(t *testing.T) {
	const redirect = "http://rp.test/callback"
	p := Start(t, []string{redirect}, User{Username: "a", Email: "a@example.com", EmailVerified: true, Name: "A"})
	ctx := context.Background()
	discovered, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	cfg := oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, Endpoint: discovered.Endpoint(),
		RedirectURL: redirect, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(cfg.AuthCodeURL("state-1", oidc.Nonce("n-1")))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, redirect) || !strings.Contains(loc, "error=invalid_request") {
		t.Errorf("authorization without PKCE: %d %q; want a redirect with invalid_request", resp.StatusCode, loc)
	}

	verifier := oauth2.GenerateVerifier()
	back, err := p.SignIn(cfg.AuthCodeURL("state-2", oidc.Nonce("n-2"), oauth2.S256ChallengeOption(verifier)), "a")
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != "state-2" || back.Query().Get("code") == "" {
		t.Fatalf("redirect back: %s", back)
	}
	if _, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Error("a code exchanged with the wrong PKCE verifier")
	}

	back, err = p.SignIn(cfg.AuthCodeURL("state-3", oidc.Nonce("n-3"), oauth2.S256ChallengeOption(verifier)), "a")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := discovered.Verifier(&oidc.Config{ClientID: p.ClientID}).Verify(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
		Name          string `json:"name"`
	}
	if err := idt.Claims(&claims); err != nil || idt.Nonce != "n-3" || idt.Subject != "sub-a" || claims.Email != "a@example.com" || !claims.EmailVerified || claims.Name != "A" {
		t.Errorf("ID token: nonce %q sub %q claims %+v (%v)", idt.Nonce, idt.Subject, claims, err)
	}
	// Another provider's key does not verify it.
	other := Start(t, []string{redirect})
	otherDiscovered, err := oidc.NewProvider(ctx, other.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherDiscovered.Verifier(&oidc.Config{ClientID: p.ClientID, SkipIssuerCheck: true}).Verify(ctx, raw); err == nil {
		t.Error("an ID token verified against another provider's keys")
	}
}
