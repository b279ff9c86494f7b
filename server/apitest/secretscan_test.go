package apitest

import (
	"context"
	"testing"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestSecretScanFindsLeaks proves the scan every test runs at its end can fail: a tracked
// secret written to the logs or to the audit log is found.
func TestSecretScanFindsLeaks(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	inLogs, inAudit := "renga_operator_"+random(26), "renga_user_"+random(26)
	_, _ = env.Logs.Write([]byte(`{"msg":"oops","token":"` + inLogs + `"}`))
	e := domain.ReleaseAudit("inv_x", "leak", "", domain.OutcomeFailed, []string{inAudit})
	if err := domain.RecordAudit(context.Background(), env.Pool, e); err != nil {
		t.Fatal(err)
	}
	env.Track(inLogs, inAudit)
	leaked, err := env.LeakedSecrets()
	if err != nil || len(leaked) != 2 {
		t.Fatalf("leaked = %v (%v), want both", leaked, err)
	}
	// Clean up what this test planted, so that the scan at its end passes.
	if _, err := env.Pool.Exec(context.Background(), `DELETE FROM audit_events WHERE operation = 'leak'`); err != nil {
		t.Fatal(err)
	}
	clean := servertest.Start(t)
	clean.Track(inLogs)
	if leaked, err := clean.LeakedSecrets(); err != nil || len(leaked) != 0 {
		t.Errorf("a clean server leaks %v (%v)", leaked, err)
	}
	// env's logs still hold inLogs: forget it there.
	env.ForgetSecrets()
}
