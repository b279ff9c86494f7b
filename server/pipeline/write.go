package pipeline

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// Sentinels of write's transaction function: not errors of the request.
var (
	errReplay        = errors.New("stored response")
	errHandlerFailed = errors.New("handler answered with an error")
)

// write is stage 10: the write's one transaction. The credential check, the stored result and
// the change and its audit event commit together, or nothing does. An operation marked
// x-renga-one-round-trip, by an operator token, runs its handler first and sends the checks,
// its statements, the stored result and the audit event in one round trip (domain.QueueWriteChecks);
// when a check refuses, the write is sent again the two-round-trip way, which answers it.
func (p *Pipeline) write(w http.ResponseWriter, r *http.Request, next http.Handler, k *domain.IdempotencyKey, pathParams map[string]string) {
	st := From(r.Context())
	wt := &writeTx{p: p, r: r, next: next, k: k, st: st, rec: newRecorder(),
		oneTrip: st.Op.OneRoundTrip && st.Actor.Type == domain.ActorOperatorToken,
		writer: domain.Writer{ActorType: st.Actor.Type, CredentialID: st.Actor.CredentialID,
			OrganizationID: st.Actor.OrganizationID, ChangesOwnCredential: st.Op.ChangesOwnCredential}}
	err := wt.run()
	if st.cachedToken != nil {
		if refused := p.settleCachedToken(r, st, wt.confirmed, err); refused != nil {
			Fail(w, r, refused)
			return
		}
	}
	p.answerWrite(w, r, wt, err, pathParams)
}

// writeTx is one write's transaction, attempted once or twice (oneTrip, then the
// two-round-trip way).
type writeTx struct {
	p       *Pipeline
	r       *http.Request
	next    http.Handler
	k       *domain.IdempotencyKey
	st      *State
	writer  domain.Writer
	oneTrip bool
	rec     *recorder            // the handler's response
	stored  *domain.StoredResult // the result stored under the key, on a replay
	// confirmed: the credential was re-checked in the transaction.
	confirmed bool
}

// run runs the write's transaction and returns its error, the deferred statements' errors
// translated to the domain's.
func (wt *writeTx) run() error {
	ctx, st := wt.r.Context(), wt.st
	audit := st.Audit // what a second attempt starts from
	err := db.WithWriteTx(ctx, wt.p.pool, wt.attempt)
	if wt.oneTrip && domain.WriteChecksRefused(err) {
		// The token is gone, or a result is stored under the key (a replay, or the key reused):
		// nothing was written. The two-round-trip way reads what the checks only refused.
		wt.oneTrip = false
		wt.rec = newRecorder()
		st.deferred, st.Audit, st.Problem = nil, audit, nil
		err = db.WithWriteTx(ctx, wt.p.pool, wt.attempt)
	}
	// In one round trip, the checks passed when the write committed or a statement after them
	// failed (a deferred statement's error, translated below).
	checked := wt.oneTrip && err == nil
	if err != nil && len(st.deferred) > 0 && !errors.Is(err, errReplay) && !errors.Is(err, errHandlerFailed) {
		for _, d := range st.deferred {
			if t := d.translate(err); t != err { //nolint:errorlint // a translation returns a new error
				err = t
				checked = wt.oneTrip
				st.Audit = AuditNote{} // what the statement would have made does not exist
				break
			}
		}
	}
	wt.confirmed = wt.confirmed || checked
	return err
}

// attempt is the transaction's function: the checks, the handler, then the stored result and
// the audit event queued for the last round trip.
func (wt *writeTx) attempt(tx *db.WriteTx) (*pgx.Batch, error) {
	st := wt.st
	last := &pgx.Batch{}
	if wt.oneTrip {
		if err := domain.QueueWriteChecks(last, wt.writer, wt.k); err != nil {
			return nil, err
		}
		st.Tx, st.TxNow = tx, time.Now().UTC().Truncate(time.Microsecond)
	} else {
		start, err := domain.BeginWrite(wt.r.Context(), tx, wt.writer, wt.k)
		wt.confirmed = wt.confirmed || start.CredentialChecked
		if err != nil {
			return nil, err
		}
		if start.Stored != nil {
			wt.stored = start.Stored
			return nil, errReplay
		}
		st.Tx, st.TxNow = tx, start.Now
	}
	defer func() { st.Tx = nil }()
	if !st.Op.StreamedBody {
		wt.r.Body = handlerBody(st) // again on each attempt
	}
	wt.next.ServeHTTP(wt.rec, wt.r)
	status := wt.rec.code()
	if status >= 400 {
		return nil, errHandlerFailed
	}
	var result *domain.StoredResult
	if wt.k != nil {
		expires := time.Now().Add(wt.p.opts.IdempotencyRetention).UTC().Truncate(time.Second)
		wt.rec.header.Set("Idempotency-Expires", expires.Format(time.RFC3339))
		var err error
		if result, err = storedResult(status, wt.rec.header, wt.rec.body.Bytes(), st.Op.SecretFields); err != nil {
			return nil, err
		}
		result.Expires = expires
	}
	for _, d := range st.deferred {
		last.Queue(d.sql, d.args...)
	}
	return last, domain.FinishWrite(last, wt.k, result, succeeded(st, status))
}

// settleCachedToken settles a token taken from the cache after the write: the transaction's
// first round trip confirmed it, found it revoked or expired (answered as its lookup would have
// answered), or did not get that far (the database down, the deadline passed while the token's
// lock was held). A revocation that commits while the write waits for the token's lock is taken
// as made before the request (a 401 with no audit, as a lookup after it answers); a token that
// was looked up is audited in that race, as an attempt of an actor it had authenticated. It
// returns the problem to answer instead of the write's, if any.
func (p *Pipeline) settleCachedToken(r *http.Request, st *State, confirmed bool, err error) *problem.Error {
	switch {
	case confirmed:
		st.cachedToken = nil
		return nil
	case errors.Is(err, domain.ErrCredentialGone):
		return p.refuseCachedToken(r, st, errBadCredential)
	default:
		return p.confirmToken(r, st)
	}
}

// answerWrite answers the write: its response, a replay, or its failure, audited.
func (p *Pipeline) answerWrite(w http.ResponseWriter, r *http.Request, wt *writeTx, err error, pathParams map[string]string) {
	ctx, st := r.Context(), wt.st
	switch {
	case err == nil:
		wt.rec.flush(w)
	case errors.Is(err, errReplay):
		if !bytes.Equal(wt.stored.Digest, wt.k.Digest) {
			pe := problem.New(http.StatusConflict, api.ErrorCodeIdempotencyKeyReused,
				"This Idempotency-Key was used for a different request; use a new key for a new request.")
			w.Header().Set("Idempotency-Expires", wt.stored.Expires.UTC().Format(time.RFC3339))
			p.auditFailure(ctx, st, pathParams, pe)
			Fail(w, r, pe)
			return
		}
		replay(w, wt.stored)
	case errors.Is(err, errHandlerFailed):
		pe := st.Problem
		if pe == nil { // a handler that wrote an error without Fail: audit its status
			pe = &problem.Error{Status: wt.rec.code()}
		}
		p.auditFailure(ctx, st, pathParams, pe)
		wt.rec.flush(w)
	default:
		pe := problem.FromError(err)
		if pe == nil {
			p.log.ErrorContext(ctx, "write failed", "request_id", st.ID, "operation", st.Op.ID, "error", err)
			pe = problem.Internal()
		}
		p.auditFailure(ctx, st, pathParams, pe)
		Fail(w, r, pe)
	}
}
