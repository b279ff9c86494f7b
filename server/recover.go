package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

// Local recovery sign-in (DESIGN §6): the page where a support person signs in with the
// one-time code `renga identity-provider recover-local` printed on the server host. Nothing
// here creates a recovery: only the release command does.

// SignInRecoverPath is the recovery page (the release command prints its URL).
const SignInRecoverPath = "/signin/recover"

// RecoverCookie binds the recovery form to the browser that opened it (the form's CSRF token
// is an HMAC under its value, which another site cannot read).
const RecoverCookie = "renga_recover"

// recoverForm shows the form, with a fresh browser binding.
func (s *Server) recoverForm(w http.ResponseWriter, _ *http.Request) {
	binding := domain.NewSecret()
	s.setCookie(w, RecoverCookie, binding, time.Now().Add(domain.SignInFlowLifetime))
	s.render(w, http.StatusOK, signInView{Title: "Local recovery sign-in", Recover: true, CSRF: derive(binding, "recover")})
}

// recoverSignIn spends a recovery and starts a session (method local_recovery), with the
// sign-in's audit event, in one transaction. A form from another origin or without this
// browser's binding is refused before anything is looked up. Any code that does not match a
// usable recovery for the email gets one refusal, audited in its own transaction.
func (s *Server) recoverSignIn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if origin := r.Header.Get("Origin"); origin != "" && origin != publicOrigin(s.cfg.PublicURL) {
		s.refuse(w, r, &domain.SignInError{Reason: "A recovery sign-in must come from this deployment's own page."})
		return
	}
	binding := s.cookie(r, RecoverCookie)
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if binding == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(derive(binding, "recover"))) != 1 {
		s.refuse(w, r, &domain.SignInError{Reason: "The recovery form is stale or not this deployment's: open " + SignInRecoverPath + " again."})
		return
	}
	email, code := r.PostFormValue("email"), r.PostFormValue("code")
	st := pipeline.From(ctx)
	source := sourceString(st)
	var sess domain.DeploymentSession
	var secret string
	old := s.cookie(r, SessionCookie)
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if sess, secret, err = domain.SignInWithLocalRecovery(ctx, tx, email, code, st.ID, source); err != nil {
			return err
		}
		// Signing in replaces the browser's session: the one it held ends now, in the same
		// transaction (a failure here must not spend the code without a session to show).
		return endPreviousSession(ctx, tx, old)
	})
	if err != nil {
		status := s.refuse(w, r, err)
		outcome := domain.OutcomeFailed
		var se *domain.SignInError
		if errors.As(err, &se) {
			outcome = domain.OutcomeDenied
		}
		refused := domain.LocalRecoverySignInAudit("", email, st.ID, source, outcome, status, refusalCode(err, status))
		if err := domain.RecordAudit(context.WithoutCancel(ctx), s.pool, refused); err != nil {
			s.log.ErrorContext(ctx, "audit of a refused recovery sign-in", "request_id", st.ID, "error", err)
		}
		return
	}
	s.log.InfoContext(ctx, "signed in", "request_id", st.ID, "session_id", sess.ID, "method", sess.Method)
	s.setCookie(w, RecoverCookie, "", time.Time{})
	s.setCookie(w, SessionCookie, secret, sess.ExpiresAt)
	http.Redirect(w, r, signInPath, http.StatusSeeOther)
}
