package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

// The sign-in's return from the identity provider: the callback verifies who the provider
// vouched for, then activates a tested revision or starts a deployment session.

// signInCallback is where the provider sends the browser back. The flow is taken (once) by
// its state and the browser's flow cookie; the code is exchanged with the PKCE verifier; the
// ID token's signature, issuer, audience, expiry and nonce are verified; the person's email
// must be verified and in an allowed domain. Then a test activates its revision, or a
// sign-in starts a session.
func (s *Server) signInCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	flowSecret := s.cookie(r, FlowCookie)
	s.setCookie(w, FlowCookie, "", time.Time{})
	if flowSecret == "" {
		s.refuse(w, r, &domain.SignInError{Reason: "This browser started no sign-in (or its cookie expired): start again."})
		return
	}
	q := r.URL.Query()
	flow, err := domain.TakeSignInFlow(ctx, s.pool, domain.HashSecret(q.Get("state")), domain.HashSecret(flowSecret))
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	email, err := s.verifyCallback(ctx, flow, flowSecret, q)
	if flow.Purpose == domain.PurposeTest {
		s.finishTest(w, r, flow, email, err)
		return
	}
	if err != nil {
		status := s.refuse(w, r, err)
		s.auditRefusedSignIn(ctx, flow, email.Email, err, status)
		return
	}
	s.finishSignIn(w, r, flow, email)
}

// auditRefusedSignIn records a sign-in the deployment refused after the provider's callback:
// by anonymous, with the email the provider vouched for when there is one; denied when the
// person was refused (SignInError), failed when the deployment or the provider failed.
func (s *Server) auditRefusedSignIn(ctx context.Context, flow domain.SignInFlow, email string, err error, status int) {
	st := pipeline.From(ctx)
	outcome := domain.OutcomeFailed
	if se := (*domain.SignInError)(nil); err == nil || errors.As(err, &se) {
		outcome = domain.OutcomeDenied
	}
	refused := domain.SignInAudit(flow.ProviderID, "", email, st.ID, sourceString(st), outcome, status, refusalCode(err, status))
	if err := domain.RecordAudit(context.WithoutCancel(ctx), s.pool, refused); err != nil {
		s.log.ErrorContext(ctx, "audit of a refused sign-in", "request_id", st.ID, "error", err)
	}
}

// endPreviousSession revokes the session whose cookie the browser still held, if it is live.
func endPreviousSession(ctx context.Context, q db.DBTX, cookie string) error {
	if cookie == "" {
		return nil
	}
	prev, err := domain.DeploymentSessionBySecret(ctx, q, cookie)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return domain.RevokeDeploymentSession(ctx, q, prev.ID)
}

// verifiedIdentity is who the provider vouched for.
type verifiedIdentity struct {
	Subject, Email, Name string
}

func (s *Server) verifyCallback(ctx context.Context, flow domain.SignInFlow, flowSecret string, q url.Values) (verifiedIdentity, error) {
	p := s.providers()
	if flow.Purpose == domain.PurposeSignIn {
		if err := p.StillServing(ctx, s.pool, flow); err != nil {
			return verifiedIdentity{}, err
		}
	}
	if e := q.Get("error"); e != "" {
		return verifiedIdentity{}, &domain.SignInError{Reason: fmt.Sprintf("The identity provider refused the sign-in (%.100s).", e)}
	}
	cfg, err := p.RevisionConfig(ctx, s.pool, flow.ProviderID, flow.Revision)
	if errors.Is(err, domain.ErrNotFound) {
		return verifiedIdentity{}, &domain.SignInError{Reason: "The identity provider was deleted."}
	}
	if err != nil {
		return verifiedIdentity{}, err
	}
	op, err := s.discovery.provider(ctx, cfg.Issuer)
	if err != nil {
		return verifiedIdentity{}, err
	}
	tok, err := s.oauth2Config(cfg, op).Exchange(s.discovery.clientContext(ctx), q.Get("code"),
		oauth2.VerifierOption(derive(flowSecret, "pkce")))
	if err != nil {
		s.log.InfoContext(ctx, "sign-in: code exchange failed", "request_id", pipeline.From(ctx).ID, "provider_id", flow.ProviderID, "error", err)
		return verifiedIdentity{}, &domain.SignInError{Reason: "The identity provider did not accept the sign-in's code."}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return verifiedIdentity{}, &domain.SignInError{Reason: "The identity provider returned no ID token."}
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: cfg.ClientID}).Verify(s.discovery.clientContext(ctx), raw)
	if err != nil {
		s.log.InfoContext(ctx, "sign-in: ID token refused", "request_id", pipeline.From(ctx).ID, "provider_id", flow.ProviderID, "error", err)
		return verifiedIdentity{}, &domain.SignInError{Reason: "The identity provider's ID token did not verify."}
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(derive(flowSecret, "nonce"))) != 1 {
		return verifiedIdentity{}, &domain.SignInError{Reason: "The ID token's nonce is not this sign-in's."}
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
		Name          string `json:"name"`
	}
	if err := idt.Claims(&claims); err != nil {
		return verifiedIdentity{}, &domain.SignInError{Reason: "The ID token's claims could not be read."}
	}
	if err := cfg.CheckIdentity(claims.Email, claims.EmailVerified); err != nil {
		// Refused, but the token verified: its email names who was refused, in the audit.
		return verifiedIdentity{Subject: idt.Subject, Email: claims.Email}, err
	}
	return verifiedIdentity{Subject: idt.Subject, Email: claims.Email, Name: claims.Name}, nil
}

// finishTest activates the tested revision, or audits the failed attempt.
func (s *Server) finishTest(w http.ResponseWriter, r *http.Request, flow domain.SignInFlow, who verifiedIdentity, verr error) {
	ctx := r.Context()
	st := pipeline.From(ctx)
	source := sourceString(st)
	if verr == nil {
		var ip domain.IdentityProvider
		err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			ip, err = domain.ActivateTestedRevision(ctx, tx, flow, domain.TestAudit(flow, st.ID, source, domain.OutcomeSucceeded, http.StatusOK, ""))
			return err
		})
		if err == nil {
			s.log.InfoContext(ctx, "identity provider revision activated by its test", "request_id", st.ID,
				"provider_id", flow.ProviderID, "revision", flow.Revision)
			s.render(w, http.StatusOK, signInView{Title: "Provider activated", Activated: &ip, Email: who.Email})
			return
		}
		verr = err
	}
	status := s.refuse(w, r, verr)
	failed := domain.TestAudit(flow, st.ID, source, domain.OutcomeFailed, status, refusalCode(verr, status))
	if err := domain.RecordAudit(context.WithoutCancel(ctx), s.pool, failed); err != nil {
		s.log.ErrorContext(ctx, "audit of a failed provider test", "request_id", st.ID, "error", err)
	}
}

// finishSignIn starts a session, a cookie whose value only the browser holds, for a person
// the support source names (deployment sign-in is for support people only).
func (s *Server) finishSignIn(w http.ResponseWriter, r *http.Request, flow domain.SignInFlow, who verifiedIdentity) {
	ctx := r.Context()
	src, err := domain.GetSupportSource(ctx, s.pool)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	st := pipeline.From(ctx)
	source := sourceString(st)
	if !src.Names(flow.ProviderID, who.Email) {
		status := s.refuse(w, r, &domain.SignInError{Reason: "Deployment sign-in is for the deployment's support people only, and its support source does not name " +
			who.Email + " with this identity provider."})
		s.auditRefusedSignIn(ctx, flow, who.Email, nil, status)
		return
	}
	// The session and its audit event, in one transaction.
	var sess domain.DeploymentSession
	var secret string
	err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		sess, secret, err = domain.CreateDeploymentSession(ctx, tx, domain.DeploymentSession{ProviderID: flow.ProviderID,
			Subject: who.Subject, Email: who.Email, Name: who.Name})
		if err != nil {
			return err
		}
		if err := domain.RecordAudit(ctx, tx, domain.SignInAudit(flow.ProviderID, sess.ID, who.Email, st.ID, source,
			domain.OutcomeSucceeded, http.StatusSeeOther, "")); err != nil {
			return err
		}
		// Signing in again replaces the browser's session: the one it held ends now.
		return endPreviousSession(ctx, tx, s.cookie(r, SessionCookie))
	})
	if err != nil {
		status := s.refuse(w, r, err)
		s.auditRefusedSignIn(ctx, flow, who.Email, err, status)
		return
	}
	s.log.InfoContext(ctx, "signed in", "request_id", st.ID, "session_id", sess.ID, "provider_id", flow.ProviderID)
	s.setCookie(w, SessionCookie, secret, sess.ExpiresAt)
	http.Redirect(w, r, signInPath, http.StatusSeeOther)
}
