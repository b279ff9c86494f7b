package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// Helpers of the lifecycle tests (invitations, owners, policy, usage, purge).

const (
	acceptPath   = "/api/v1/invitations/accept"
	mePath       = "/api/v1/org/me"
	activityPath = "/api/v1/org/activity"
	settingsPath = "/api/v1/org/settings"
)

func invitationsPath(orgID string) string { return orgPath(orgID) + "/invitations" }
func invitationPath(orgID, invID string) string {
	return invitationsPath(orgID) + "/" + invID
}

// inviteTokenRE matches an invitation secret: the prefix and 32 bytes of lowercase base32.
var inviteTokenRE = regexp.MustCompile(`renga_invite_[a-z2-7]{52}`)

// invitation is the JSON of an invitation.
type invitation struct {
	ID             string     `json:"id"`
	OrganizationID string     `json:"organization_id"`
	Email          string     `json:"email"`
	State          string     `json:"state"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	AcceptedAt     *time.Time `json:"accepted_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
}

// acceptedJSON is the body of a successful acceptance.
type acceptedJSON struct {
	User struct {
		ID          string `json:"id"`
		Email       string `json:"email"`
		DisplayName string `json:"display_name"`
	} `json:"user"`
	Organization struct {
		ID    string `json:"id"`
		Slug  string `json:"slug"`
		State string `json:"state"`
	} `json:"organization"`
	APIKey string `json:"api_key"`
}

// activityJSON is one entry of GET /api/v1/org/activity.
type activityJSON struct {
	ID        string `json:"id"`
	RequestID string `json:"request_id"`
	Operation string `json:"operation"`
	Actor     struct {
		Type         string `json:"type"`
		ID           string `json:"id"`
		NameSnapshot string `json:"name_snapshot"`
	} `json:"actor"`
	ChangedFields []string `json:"changed_fields"`
}

// inviteReq is POST .../invitations; key "" sends no Idempotency-Key.
func inviteReq(token, orgID, email, key string) req {
	r := req{Method: http.MethodPost, Path: invitationsPath(orgID), Token: token,
		Body: jsonBody(map[string]string{"email": email}), Header: http.Header{}}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return r
}

// invite creates an invitation over HTTP and returns it.
func invite(t testing.TB, env *servertest.Env, token, orgID, email string) invitation {
	t.Helper()
	rep := send(t, env, inviteReq(token, orgID, email, newKey()))
	if rep.Status != http.StatusCreated {
		t.Fatalf("invite %s: %d %s", email, rep.Status, rep.Body)
	}
	var inv invitation
	rep.decode(t, &inv)
	return inv
}

// acceptReq is POST /api/v1/invitations/accept, without credentials.
func acceptReq(secret, name string) req {
	return req{Method: http.MethodPost, Path: acceptPath,
		Body: jsonBody(map[string]string{"token": secret, "display_name": name})}
}

// accept redeems an invitation secret and returns the new owner.
func accept(t testing.TB, env *servertest.Env, secret, name string) acceptedJSON {
	t.Helper()
	rep := send(t, env, acceptReq(secret, name))
	if rep.Status != http.StatusCreated {
		t.Fatalf("accept: %d %s", rep.Status, rep.Body)
	}
	var a acceptedJSON
	rep.decode(t, &a)
	env.Track(a.APIKey) // the suite's secret scan at the end of the test looks for it
	return a
}

// invitationOfSecret is the ID of the invitation a secret redeems ("" if none).
func invitationOfSecret(t testing.TB, env *servertest.Env, secret string) string {
	t.Helper()
	var id string
	err := env.Pool.QueryRow(context.Background(), `SELECT id FROM invitations WHERE token_hash = $1`, domain.HashSecret(secret)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// secretIn finds, among the texts (mail bodies), the secret of invitation invID.
func secretIn(t testing.TB, env *servertest.Env, invID string, texts []string) string {
	t.Helper()
	for _, text := range texts {
		for _, s := range inviteTokenRE.FindAllString(text, -1) {
			if invitationOfSecret(t, env, s) == invID {
				env.Track(s)
				return s
			}
		}
	}
	t.Fatalf("no mail carries the secret of %s", invID)
	return ""
}

// outboxSecret reads the secret of invitation invID from its unsent mail in the database (for
// tests that run no mail worker).
func outboxSecret(t testing.TB, env *servertest.Env, orgID, invID string) string {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT body FROM outbound_mail WHERE organization_id = $1 AND body IS NOT NULL`, orgID)
	if err != nil {
		t.Fatal(err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return secretIn(t, env, invID, bodies)
}

// addOwner invites email to orgID over HTTP and accepts the invitation over HTTP.
func addOwner(t testing.TB, env *servertest.Env, token, orgID, email, name string) acceptedJSON {
	t.Helper()
	inv := invite(t, env, token, orgID, email)
	return accept(t, env, outboxSecret(t, env, orgID, inv.ID), name)
}

// getInvitation reads an invitation over HTTP, with its raw body.
func getInvitation(t testing.TB, env *servertest.Env, token, orgID, invID string) (invitation, []byte) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: invitationPath(orgID, invID), Token: token})
	if rep.Status != http.StatusOK {
		t.Fatalf("get invitation: %d %s", rep.Status, rep.Body)
	}
	var inv invitation
	rep.decode(t, &inv)
	return inv, rep.Body
}

// listActivity reads the caller's organization's Activity (first page, newest first).
func listActivity(t testing.TB, env *servertest.Env, key string) []activityJSON {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: activityPath + "?page_size=500", Token: key})
	if rep.Status != http.StatusOK {
		t.Fatalf("activity: %d %s", rep.Status, rep.Body)
	}
	var list struct {
		Items []activityJSON `json:"items"`
	}
	rep.decode(t, &list)
	return list.Items
}

// findActivity returns the entries with operation op.
func findActivity(items []activityJSON, op string) []activityJSON {
	var out []activityJSON
	for _, a := range items {
		if a.Operation == op {
			out = append(out, a)
		}
	}
	return out
}

// withSMTP sends mail through the capture server.
func withSMTP(c *servertest.SMTPCapture) servertest.Option {
	return func(cfg *server.Config) { cfg.SMTPURL = c.URL() }
}

// mailTo returns the bodies of the captured mails to recipient.
func mailTo(mails []servertest.Mail, recipient string) []string {
	var out []string
	for _, m := range mails {
		if slices.Contains(m.To, recipient) {
			out = append(out, m.Data)
		}
	}
	return out
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInvitationEndToEnd: an operator creates an organization and invites an owner; the mail
// goes through SMTP and carries the link; accepting it yields a personal API key that works on
// the owner API; the owner's Activity shows the operator's changes and the acceptance; an
// invitation is accepted once; revoked, expired and replaced invitations fail with their codes;
// no secret lands in the audit log, Activity, jobs, stored responses or the server log.
func TestInvitationEndToEnd(t *testing.T) {
	t.Parallel()
	capture := servertest.NewSMTPCapture(t)
	env := servertest.Start(t, withSMTP(capture))
	env.StartJobs(t)
	ctx := context.Background()
	opTok, op := mintToken(t, env, domain.NewToken{Name: "ops-alice", Scopes: []string{"organizations:write"}})
	var secrets []string // every invitation secret and API key seen, for the final scan

	org := createOrg(t, env, op, "acme", "Acme Corporation")

	// The invitation needs an Idempotency-Key; without one nothing is created and no mail queued.
	send(t, env, inviteReq(op, org.ID, "olivia@acme.example", "")).
		expectProblem(t, http.StatusBadRequest, "idempotency_key_required")
	if n := countRows(t, env, `SELECT count(*) FROM invitations WHERE organization_id = $1`, org.ID); n != 0 {
		t.Fatalf("a refused invitation left %d invitations", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM outbound_mail`); n != 0 {
		t.Fatalf("a refused invitation queued %d mails", n)
	}

	before := time.Now()
	rep := send(t, env, inviteReq(op, org.ID, "Olivia@Acme.example", newKey()))
	if rep.Status != http.StatusCreated {
		t.Fatalf("invite: %d %s", rep.Status, rep.Body)
	}
	var inv invitation
	rep.decode(t, &inv)
	if inv.State != "pending" || inv.Email != "olivia@acme.example" || inv.OrganizationID != org.ID || !strings.HasPrefix(inv.ID, "inv_") {
		t.Errorf("created invitation = %+v", inv)
	}
	if want := before.Add(domain.InvitationTTL); inv.ExpiresAt.Before(want.Add(-time.Minute)) || inv.ExpiresAt.After(want.Add(time.Minute)) {
		t.Errorf("expires_at = %s, want about %s (7 days)", inv.ExpiresAt, want)
	}
	if loc := rep.Header.Get("Location"); loc != invitationPath(org.ID, inv.ID) {
		t.Errorf("Location = %q", loc)
	}
	if strings.Contains(string(rep.Body), domain.InvitationPrefix) {
		t.Errorf("the creation response carries a secret: %s", rep.Body)
	}

	// The mail arrives through SMTP and carries the link with the secret.
	mails := capture.Wait(t, 1, 15*time.Second)
	if len(mails) != 1 || !slices.Equal(mails[0].To, []string{"olivia@acme.example"}) {
		t.Fatalf("mails = %+v", mails)
	}
	secret := secretIn(t, env, inv.ID, []string{mails[0].Data})
	secrets = append(secrets, secret)
	if link := env.Config.PublicURL + "/invitations/accept#token=" + secret; !strings.Contains(mails[0].Data, link) {
		t.Errorf("the mail does not carry the link %s:\n%s", link, mails[0].Data)
	}
	if !strings.Contains(mails[0].Data, "Acme Corporation") {
		t.Errorf("the mail does not name the organization:\n%s", mails[0].Data)
	}
	// Once sent, the stored mail forgets its body (the secret).
	waitFor(t, 10*time.Second, "the mail to be marked sent", func() bool {
		return countRows(t, env, `SELECT count(*) FROM outbound_mail WHERE sent_at IS NOT NULL`) == 1
	})
	if n := countRows(t, env, `SELECT count(*) FROM outbound_mail WHERE sent_at IS NOT NULL AND body IS NOT NULL`); n != 0 {
		t.Errorf("%d sent mails keep their body", n)
	}

	// Accepting needs no credentials and returns the personal API key once.
	rep = send(t, env, acceptReq(secret, "Olivia Owner"))
	if rep.Status != http.StatusCreated {
		t.Fatalf("accept: %d %s", rep.Status, rep.Body)
	}
	var owner acceptedJSON
	rep.decode(t, &owner)
	env.Track(owner.APIKey)
	secrets = append(secrets, owner.APIKey)
	if !domain.LooksLikeUserKey(owner.APIKey) || owner.User.Email != "olivia@acme.example" || owner.User.DisplayName != "Olivia Owner" ||
		!strings.HasPrefix(owner.User.ID, "usr_") || owner.Organization.ID != org.ID || owner.Organization.State != "active" {
		t.Errorf("accepted = %s", rep.Body)
	}

	// The key works on the owner API.
	rep = send(t, env, req{Method: http.MethodGet, Path: mePath, Token: owner.APIKey})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET /org/me: %d %s", rep.Status, rep.Body)
	}
	var me struct {
		User         struct{ ID, Email string }
		Organization struct{ ID, Slug string }
		Role         string
	}
	rep.decode(t, &me)
	if me.User.ID != owner.User.ID || me.Organization.ID != org.ID || me.Organization.Slug != "acme" || me.Role != "owner" {
		t.Errorf("GET /org/me = %s", rep.Body)
	}

	// The owner sees the operator's changes (by token ID and name) and their own acceptance.
	acts := listActivity(t, env, owner.APIKey)
	for _, op := range []string{"createOrganization", "createInvitation"} {
		found := findActivity(acts, op)
		if len(found) != 1 {
			t.Errorf("Activity has %d %s entries, want 1: %+v", len(found), op, acts)
			continue
		}
		a := found[0]
		if a.Actor.Type != "operator_token" || a.Actor.ID != opTok.ID || a.Actor.NameSnapshot != "ops-alice" || len(a.ChangedFields) == 0 {
			t.Errorf("Activity %s = %+v, want by operator_token %s (ops-alice) with changed fields", op, a, opTok.ID)
		}
	}
	if found := findActivity(acts, "acceptInvitation"); len(found) != 1 ||
		found[0].Actor.Type != "user" || found[0].Actor.ID != owner.User.ID || found[0].Actor.NameSnapshot != "Olivia Owner" {
		t.Errorf("Activity of the acceptance = %+v", found)
	}
	if len(acts) > 0 && acts[0].Operation != "acceptInvitation" {
		t.Errorf("Activity is not newest first: %+v", acts)
	}

	// Accepted once: a second acceptance fails and creates nothing.
	send(t, env, acceptReq(secret, "Again")).expectProblem(t, http.StatusGone, "invitation_accepted")
	if n := countRows(t, env, `SELECT count(*) FROM user_api_keys`); n != 1 {
		t.Errorf("%d API keys after a refused second acceptance, want 1", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM memberships WHERE organization_id = $1`, org.ID); n != 1 {
		t.Errorf("%d memberships, want 1", n)
	}
	got, raw := getInvitation(t, env, op, org.ID, inv.ID)
	if got.State != "accepted" || got.AcceptedAt == nil || got.RevokedAt != nil {
		t.Errorf("accepted invitation = %s", raw)
	}
	// Revoking an accepted invitation changes nothing.
	rep = send(t, env, req{Method: http.MethodDelete, Path: invitationPath(org.ID, inv.ID), Token: op})
	if rep.Status != http.StatusOK || !strings.Contains(string(rep.Body), `"state":"accepted"`) {
		t.Errorf("revoke of an accepted invitation: %d %s", rep.Status, rep.Body)
	}

	// A revoked invitation fails with invitation_revoked; revoking twice is success.
	revoked := invite(t, env, op, org.ID, "rex@acme.example")
	for i := 0; i < 2; i++ {
		rep = send(t, env, req{Method: http.MethodDelete, Path: invitationPath(org.ID, revoked.ID), Token: op})
		var r invitation
		if rep.Status == http.StatusOK {
			rep.decode(t, &r)
		}
		if rep.Status != http.StatusOK || r.State != "revoked" || r.RevokedAt == nil {
			t.Errorf("revoke #%d: %d %s", i+1, rep.Status, rep.Body)
		}
		// The first revocation changed the state, the second nothing. Fails when: RevokeInvitation
		// reports changes by err == nil or RowsAffected() != 0 (invitation.go).
		a := expectOneAudit(t, env, rep, "revokeInvitation", "succeeded", opTok.ID, org.ID, "")
		if want := []string{"state"}[:1-i]; !slices.Equal(a.ChangedFields, want) {
			t.Errorf("revoke #%d audit changed_fields = %v, want %v", i+1, a.ChangedFields, want)
		}
	}
	// An expired one fails with invitation_expired.
	expired := invite(t, env, op, org.ID, "eve@acme.example")
	if _, err := env.Pool.Exec(ctx, `UPDATE invitations SET expires_at = now() - interval '1 minute' WHERE id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}
	if got, raw := getInvitation(t, env, op, org.ID, expired.ID); got.State != "expired" {
		t.Errorf("invitation past its deadline = %s, want state expired", raw)
	}
	// A second invitation for the same address revokes the first.
	first := invite(t, env, op, org.ID, "dana@acme.example")
	second := invite(t, env, op, org.ID, "DANA@acme.example")
	if got, raw := getInvitation(t, env, op, org.ID, first.ID); got.State != "revoked" || got.RevokedAt == nil {
		t.Errorf("the replaced invitation = %s, want revoked", raw)
	}
	if got, raw := getInvitation(t, env, op, org.ID, second.ID); got.State != "pending" {
		t.Errorf("the replacing invitation = %s, want pending", raw)
	}

	mails = capture.Wait(t, 5, 15*time.Second)
	revokedSecret := secretIn(t, env, revoked.ID, mailTo(mails, "rex@acme.example"))
	expiredSecret := secretIn(t, env, expired.ID, mailTo(mails, "eve@acme.example"))
	firstSecret := secretIn(t, env, first.ID, mailTo(mails, "dana@acme.example"))
	secondSecret := secretIn(t, env, second.ID, mailTo(mails, "dana@acme.example"))
	secrets = append(secrets, revokedSecret, expiredSecret, firstSecret, secondSecret)

	send(t, env, acceptReq(revokedSecret, "Rex")).expectProblem(t, http.StatusGone, "invitation_revoked")
	send(t, env, acceptReq(expiredSecret, "Eve")).expectProblem(t, http.StatusGone, "invitation_expired")
	send(t, env, acceptReq(firstSecret, "Dana")).expectProblem(t, http.StatusGone, "invitation_revoked")
	send(t, env, acceptReq("renga_invite_"+domain.NewSecret(), "Nobody")).expectProblem(t, http.StatusNotFound, "not_found")
	for _, email := range []string{"rex@acme.example", "eve@acme.example"} {
		if n := countRows(t, env, `SELECT count(*) FROM users WHERE email = $1`, email); n != 0 {
			t.Errorf("a refused acceptance created user %s", email)
		}
	}
	dana := accept(t, env, secondSecret, "Dana")
	secrets = append(secrets, dana.APIKey)

	// The operator lists the owners.
	rep = send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID) + "/owners", Token: op})
	if rep.Status != http.StatusOK {
		t.Fatalf("owners: %d %s", rep.Status, rep.Body)
	}
	var owners struct {
		Items []struct {
			UserID      string    `json:"user_id"`
			Email       string    `json:"email"`
			DisplayName string    `json:"display_name"`
			Since       time.Time `json:"since"`
		} `json:"items"`
	}
	rep.decode(t, &owners)
	emails := map[string]string{}
	for _, o := range owners.Items {
		emails[o.Email] = o.UserID
		if o.Since.IsZero() || o.DisplayName == "" {
			t.Errorf("owner = %+v", o)
		}
	}
	if len(owners.Items) != 2 || emails["olivia@acme.example"] != owner.User.ID || emails["dana@acme.example"] != dana.User.ID {
		t.Errorf("owners = %s", rep.Body)
	}

	// Reads of invitations never carry a secret.
	rep = send(t, env, req{Method: http.MethodGet, Path: invitationsPath(org.ID), Token: op})
	var list struct {
		Items []invitation `json:"items"`
	}
	rep.decode(t, &list)
	if rep.Status != http.StatusOK || len(list.Items) != 5 {
		t.Errorf("list invitations: %d, %d items: %s", rep.Status, len(list.Items), rep.Body)
	}
	readBodies := [][]byte{rep.Body}
	for _, i := range []string{inv.ID, revoked.ID, expired.ID, first.ID, second.ID} {
		_, raw := getInvitation(t, env, op, org.ID, i)
		readBodies = append(readBodies, raw)
	}
	for _, b := range readBodies {
		if strings.Contains(string(b), domain.InvitationPrefix) {
			t.Errorf("an invitation read carries a secret: %s", b)
		}
		for _, s := range secrets {
			if strings.Contains(string(b), strings.TrimPrefix(s, domain.InvitationPrefix)) {
				t.Errorf("an invitation read carries a secret: %s", b)
			}
		}
	}

	// Each credential path takes only its own credential.
	send(t, env, req{Method: http.MethodGet, Path: mePath, Token: op}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, env, req{Method: http.MethodGet, Path: activityPath, Token: op}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: owner.APIKey}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID), Token: owner.APIKey}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")

	// Secret scan: every mail is sent, and no invitation secret or API key appears anywhere
	// but in the mail and the one response.
	waitFor(t, 10*time.Second, "every mail to be marked sent", func() bool {
		return countRows(t, env, `SELECT count(*) FROM outbound_mail WHERE sent_at IS NULL`) == 0
	})
	if n := countRows(t, env, `SELECT count(*) FROM outbound_mail WHERE body IS NOT NULL`); n != 0 {
		t.Errorf("%d sent mails keep their body (it holds the secret)", n)
	}
	var dump strings.Builder
	for _, q := range []string{
		`SELECT row_to_json(t)::text FROM audit_events t`,
		`SELECT row_to_json(t)::text FROM organization_activity t`,
		`SELECT args::text FROM river_job`,
		`SELECT row_to_json(t)::text FROM outbound_mail t`,
		`SELECT convert_from(body, 'UTF8') || headers::text FROM idempotency_keys`,
	} {
		rows, err := env.Pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, s := range texts {
			dump.WriteString(s + "\n")
		}
	}
	dump.WriteString(env.Logs.String())
	all := dump.String()
	// The dump holds what it should: the operations, the actors, the mail jobs.
	var mailID string
	if err := env.Pool.QueryRow(ctx, `SELECT id FROM outbound_mail ORDER BY created_at LIMIT 1`).Scan(&mailID); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"createInvitation", "acceptInvitation", "revokeInvitation", opTok.ID, owner.User.ID, mailID, `"mail sent"`} {
		if !strings.Contains(all, want) {
			t.Errorf("the dump lacks %q; the scan would prove nothing", want)
		}
	}
	if len(secrets) != 7 { // five invitation secrets, two API keys
		t.Fatalf("collected %d secrets, want 7", len(secrets))
	}
	for _, s := range secrets {
		rest := strings.TrimPrefix(strings.TrimPrefix(s, domain.InvitationPrefix), domain.UserKeyPrefix)
		if strings.Contains(all, rest) {
			t.Errorf("a secret (%.20s...) appears in the audit log, Activity, jobs, mail rows, stored responses or server log", s)
		}
	}
}

// TestInvitationMailWithoutSMTP: in development without RENGA_SMTP_URL the mail is written as an
// .eml file under the data directory, and the log names the file but never the secret.
func TestInvitationMailWithoutSMTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	if env.Config.SMTPURL != nil {
		t.Fatal("the default test configuration has an SMTP URL")
	}
	env.StartJobs(t)
	_, op := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, op, "initech", "Initech")
	inv := invite(t, env, op, org.ID, "peter@initech.example")

	dir := filepath.Join(env.Config.DataDir, "mail")
	var files []string
	waitFor(t, 15*time.Second, "an .eml file under "+dir, func() bool {
		files, _ = filepath.Glob(filepath.Join(dir, "*.eml"))
		return len(files) > 0
	})
	if len(files) != 1 {
		t.Fatalf("mail files = %v, want 1", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	msg := string(b)
	secret := secretIn(t, env, inv.ID, []string{msg})
	if !strings.Contains(msg, "To: peter@initech.example\r\n") || !strings.Contains(msg, "/invitations/accept#token="+secret) {
		t.Errorf("mail file:\n%s", msg)
	}
	// The log line names the file; the log never holds the secret.
	waitFor(t, 10*time.Second, "the mail to be marked sent", func() bool {
		return countRows(t, env, `SELECT count(*) FROM outbound_mail WHERE sent_at IS NOT NULL AND body IS NULL`) == 1
	})
	var named bool
	for _, line := range strings.Split(env.Logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if f, _ := rec["file"].(string); f == files[0] {
			named = true
		}
	}
	if !named {
		t.Errorf("no log line names the mail file %s:\n%s", files[0], env.Logs.String())
	}
	if logs := env.Logs.String(); strings.Contains(logs, strings.TrimPrefix(secret, domain.InvitationPrefix)) {
		t.Errorf("the log holds the invitation secret")
	}
	// And the file's secret works.
	accept(t, env, secret, "Peter")
}

// TestInvitationByOrganizationState: an operator invites into an active or a suspended
// organization; one pending deletion takes no invitation: 409 invalid_state, nothing stored.
// Fails when: CreateInvitation's o.State != StateSuspended is made == (invitation.go).
func TestInvitationByOrganizationState(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write")
	for _, c := range []struct {
		state  string
		status int
	}{{"active", http.StatusCreated}, {"suspended", http.StatusCreated}, {"deletion_pending", http.StatusConflict}} {
		org := createOrg(t, env, op, strings.ReplaceAll(c.state, "_", "-"), "Org "+c.state)
		if _, err := env.Pool.Exec(context.Background(), `UPDATE organizations SET state = $2::text,
			purge_after = CASE WHEN $2::text = 'deletion_pending' THEN now() + interval '1 day' END WHERE id = $1`, org.ID, c.state); err != nil {
			t.Fatal(err)
		}
		rep := send(t, env, inviteReq(op, org.ID, "olivia@acme.example", newKey()))
		if rep.Status != c.status {
			t.Errorf("invite into a %s organization: %d %s, want %d", c.state, rep.Status, rep.Body, c.status)
		}
		if c.status == http.StatusConflict {
			rep.expectProblem(t, http.StatusConflict, "invalid_state")
		}
		want := 0
		if c.status == http.StatusCreated {
			want = 1
		}
		if n := countRows(t, env, `SELECT count(*) FROM invitations WHERE organization_id = $1`, org.ID); n != want {
			t.Errorf("%s organization: %d invitations stored, want %d", c.state, n, want)
		}
	}
}

// TestInvitationMalformedEmail: an address net/mail cannot read is refused by validation naming
// the field (format: email, checked as the generated type reads it), and nothing is created.
//
// Fails when: format email is not checked by the validator (the generated type's own check then
// answers "The request could not be read.", naming no field).
func TestInvitationMalformedEmail(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, token, "acme", "Acme")
	for _, email := range []string{"not-an-email", "two@@acme.example", "olivia@"} {
		rep := send(t, env, inviteReq(token, org.ID, email, newKey()))
		pb := rep.expectProblem(t, http.StatusBadRequest, "invalid_request")
		if len(pb.Errors) != 1 || pb.Errors[0].Field != "email" {
			t.Errorf("%q: errors %+v, want one naming email", email, pb.Errors)
		}
	}
	if rep := send(t, env, inviteReq(token, org.ID, "Olivia <olivia@acme.example>", newKey())); rep.Status != http.StatusCreated {
		t.Errorf("an address with a display name: %d %s", rep.Status, rep.Body)
	}
}
