package apitest

import (
	"net/http"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestOneDefinitionOfAnEmail: an address the API takes is one it can also answer with. A
// quoted local part, which the request's decoding reads into a form it cannot write back, is a
// 400 that stores nothing, not a 500; every address either round-trips or is refused.
func TestOneDefinitionOfAnEmail(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, token, "emails", "Emails")
	for _, email := range []string{`"quoted local"@example.com`, `"q"@example.com`, `user@[127.0.0.1]`, `a.b+c@example.com`} {
		r := send(t, env, inviteReq(token, org.ID, email, newKey()))
		switch r.Status {
		case http.StatusCreated:
			var inv invitation
			r.decode(t, &inv)
			var read invitation
			send(t, env, req{Method: http.MethodGet, Path: invitationsPath(org.ID) + "/" + inv.ID, Token: token}).decode(t, &read)
			if read.Email != inv.Email {
				t.Errorf("%s: created as %q, read back as %q", email, inv.Email, read.Email)
			}
		case http.StatusBadRequest:
			p := r.expectProblem(t, http.StatusBadRequest, "invalid_request")
			if len(p.Errors) == 0 || p.Errors[0].Field != "email" {
				t.Errorf("%s: 400 without naming email: %+v", email, p.Errors)
			}
		default:
			t.Errorf("%s: %d %s", email, r.Status, r.Body)
		}
	}
	if r := send(t, env, inviteReq(token, org.ID, `a.b+c@example.com`, newKey())); r.Status != http.StatusCreated {
		t.Errorf("a plain address was refused: %d %s", r.Status, r.Body)
	}
}
