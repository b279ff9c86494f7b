package apitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/servertest"
)

// Transfers (issue 10): export, single-use download, import into an empty organization on
// another deployment, and completing the move.

const transfersPath = "/api/v1/operator/transfers"

type transferJSON struct {
	ID             string           `json:"id"`
	Kind           string           `json:"kind"`
	ForMove        bool             `json:"for_move"`
	State          string           `json:"state"`
	OrganizationID string           `json:"organization_id"`
	Counts         map[string]int64 `json:"counts"`
	SHA256         *string          `json:"sha256"`
	SizeBytes      *int64           `json:"size_bytes"`
	CompletedAt    *string          `json:"completed_at"`
	DestinationURL *string          `json:"destination_url"`
	Progress       struct {
		Rows  int64 `json:"rows"`
		Bytes int64 `json:"bytes"`
	} `json:"progress"`
}

func transferPath(id string) string { return transfersPath + "/" + id }

// startExport starts an export and returns the transfer.
func startExport(t testing.TB, env *servertest.Env, token, orgID string) transferJSON {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodPost, Path: orgPath(orgID) + "/exports", Token: token, Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusAccepted {
		t.Fatalf("start export: %d %s", rep.Status, rep.Body)
	}
	var x transferJSON
	rep.decode(t, &x)
	if x.Kind != "export" || x.State != "pending" || rep.Header.Get("Location") != transferPath(x.ID) {
		t.Fatalf("export started as %+v, Location %q", x, rep.Header.Get("Location"))
	}
	return x
}

func getTransfer(t testing.TB, env *servertest.Env, token, id string) (transferJSON, reply) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: transferPath(id), Token: token})
	var x transferJSON
	if rep.Status == http.StatusOK {
		rep.decode(t, &x)
	}
	return x, rep
}

// waitTransfer polls until the transfer leaves pending and running.
func waitTransfer(t testing.TB, env *servertest.Env, token, id string) transferJSON {
	t.Helper()
	var x transferJSON
	waitFor(t, 60*time.Second, "export "+id+" to finish", func() bool {
		x, _ = getTransfer(t, env, token, id)
		return x.State != "pending" && x.State != "running"
	})
	return x
}

// exportOrg exports an organization and waits for it to succeed (env's jobs must run).
func exportOrg(t testing.TB, env *servertest.Env, token, orgID string) transferJSON {
	t.Helper()
	x := waitTransfer(t, env, token, startExport(t, env, token, orgID).ID)
	if x.State != "succeeded" || x.SHA256 == nil || x.SizeBytes == nil {
		t.Fatalf("export: %+v", x)
	}
	return x
}

// authorize creates a download authorization and returns its capability (tracked as a secret).
func authorize(t testing.TB, env *servertest.Env, token, id string) (string, reply) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodPost, Path: transferPath(id) + "/download-authorizations", Token: token,
		Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusCreated {
		t.Fatalf("authorize download: %d %s", rep.Status, rep.Body)
	}
	var a struct {
		DownloadURL string `json:"download_url"`
		ExpiresAt   string `json:"expires_at"`
	}
	rep.decode(t, &a)
	u, err := url.Parse(a.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	capability := u.Query().Get("capability")
	if !strings.HasPrefix(capability, domain.CapabilityPrefix) || u.Path != transferPath(id)+"/archive" {
		t.Fatalf("download_url %q", a.DownloadURL)
	}
	env.Track(capability)
	exp, err := time.Parse(time.RFC3339, a.ExpiresAt)
	if err != nil || time.Until(exp) > 10*time.Minute || time.Until(exp) < 9*time.Minute {
		t.Errorf("expires_at %q, want about 10 minutes from now", a.ExpiresAt)
	}
	return capability, rep
}

func archiveReq(token, id, capability string) req {
	return req{Method: http.MethodGet, Path: transferPath(id) + "/archive?capability=" + url.QueryEscape(capability), Token: token}
}

// download authorizes and downloads an export's archive, checking its length and digest.
func download(t testing.TB, env *servertest.Env, token string, x transferJSON) []byte {
	t.Helper()
	capability, _ := authorize(t, env, token, x.ID)
	rep := send(t, env, archiveReq(token, x.ID, capability))
	if rep.Status != http.StatusOK {
		t.Fatalf("download: %d %s", rep.Status, rep.Body)
	}
	sum := sha256.Sum256(rep.Body)
	if hex.EncodeToString(sum[:]) != *x.SHA256 || int64(len(rep.Body)) != *x.SizeBytes ||
		rep.Header.Get("Content-Length") != strconv.Itoa(len(rep.Body)) ||
		rep.Header.Get("Repr-Digest") != "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":" {
		t.Fatalf("archive of %d bytes, sha256 %x, headers %v; transfer says %d, %s", len(rep.Body), sum, rep.Header, *x.SizeBytes, *x.SHA256)
	}
	return rep.Body
}

func importReq(token, orgID string, archive []byte) req {
	return req{Method: http.MethodPost, Path: orgPath(orgID) + "/imports", Token: token, Body: archive,
		Header: headers("Idempotency-Key", newKey(), "Content-Type", "application/octet-stream")}
}

// sourceOrganization is an organization with everything an export must carry, and every kind
// of credential it must not.
type sourceOrganization struct {
	OrgID   string
	Owners  []acceptedJSON
	Agents  []*specAgent
	Secrets []string
}

func newSourceOrganization(t testing.TB, env *servertest.Env, token string, observations int) sourceOrganization {
	t.Helper()
	o := createOrg(t, env, token, newSlug(), "Moving "+random(3))
	s := sourceOrganization{OrgID: o.ID}
	// Owners and the pending invitation through the domain functions: the mail worker may run
	// and clear the mails that carry their secrets.
	ctx := context.Background()
	for i := range 2 {
		_, secret, err := domain.CreateInvitation(ctx, env.Pool, o.ID, "owner"+strconv.Itoa(i)+"-"+random(4)+"@example.com")
		if err != nil {
			t.Fatal(err)
		}
		a, err := domain.AcceptInvitation(ctx, env.Pool, secret, "Owner "+strconv.Itoa(i), domain.BuiltinDefaults)
		if err != nil {
			t.Fatal(err)
		}
		var owner acceptedJSON
		owner.User.ID, owner.User.Email, owner.APIKey = a.User.ID, a.User.Email, a.APIKey
		env.Track(secret, a.APIKey)
		s.Owners = append(s.Owners, owner)
		s.Secrets = append(s.Secrets, secret, owner.APIKey)
	}
	owner := s.Owners[0].APIKey
	send(t, env, settingsReq(owner, `"1"`, map[string]any{"require_mfa": true, "session_max_age_hours": 8})).expectProblemOrOK(t, http.StatusOK)
	setPolicy(t, env, token, o.ID, map[string]any{"limits": map[string]any{"max_agents": 50, "observation_retention_days": 3650},
		"entitlements": map[string]any{"organization_identity_providers": true}})
	// Identity providers of the organization's own: one enabled, with a client secret that must
	// not travel, and one its owners disabled.
	providerSecret := "org-provider-secret-" + random(12)
	env.Track(providerSecret)
	s.Secrets = append(s.Secrets, providerSecret)
	send(t, env, createOrgProvider(owner, "corp-sso", providerSecret)).expectProblemOrOK(t, http.StatusCreated)
	var old orgProviderJSON
	r := send(t, env, createOrgProvider(owner, "old-sso", ""))
	r.expectProblemOrOK(t, http.StatusCreated)
	r.decode(t, &old)
	send(t, env, req{Method: http.MethodPost, Path: orgProvidersPath + "/" + old.ID + "/disable", Token: owner}).expectProblemOrOK(t, http.StatusOK)
	key := createIntakeKey(t, env, env, owner, "k").Key
	trackKey(env, key)
	s.Secrets = append(s.Secrets, key, keySecretPart(key))
	for range 3 {
		s.Agents = append(s.Agents, register(t, env, env, key))
	}
	// A few observations through the API, the rest with SQL.
	s.Agents[0].submit(t, batchBody("api-batch", 5, 10)).accepted(t)
	per := max(observations/3, 1)
	for i, a := range s.Agents {
		if _, err := env.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT $1, $2, 'sql-' || (g / 100), now() - g * interval '1 second', 'host.facts',
				jsonb_build_object('seq', g, 'agent', $3::int, 'uptime', g * 1.5, 'tags', jsonb_build_array('a', 'b'), 'nested', jsonb_build_object('x', null))
			FROM generate_series(1, $4::int) g`, o.ID, a.ID, i, per); err != nil {
			t.Fatal(err)
		}
	}
	// Jobs: one completed, one still queued (it must never run at the destination).
	done := createJob(t, env, owner, s.Agents[0].ID, "uptime")
	createJob(t, env, owner, s.Agents[1].ID, "reboot")
	rep := s.Agents[0].do(t, http.MethodGet, agentJobsURL, nil)
	if rep.Status != http.StatusOK {
		t.Fatalf("agent jobs: %d %s", rep.Status, rep.Body)
	}
	res := jsonBody(map[string]any{"status": "succeeded", "exit_code": 0, "output": "up 3 days"})
	if r := s.Agents[0].do(t, http.MethodPost, agentResultURL(done.ID), res); r.Status != http.StatusOK {
		t.Fatalf("job result: %d %s", r.Status, r.Body)
	}
	// A pending invitation: its secret must not travel.
	_, secret, err := domain.CreateInvitation(ctx, env.Pool, o.ID, "invited-"+random(4)+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	env.Track(secret)
	s.Secrets = append(s.Secrets, secret, token)
	return s
}

// archiveBytes decompresses an archive into its members, in order.
type member struct {
	Name string
	Data []byte
}

func readArchive(t testing.TB, archive []byte) []member {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []member
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, member{h.Name, b})
	}
}

func writeArchive(t testing.TB, members []member) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		if err := tw.WriteHeader(&tar.Header{Name: m.Name, Mode: 0o644, Size: int64(len(m.Data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// editMember replaces old with new in the members whose names start with prefix, and their
// manifest entries' checksums and sizes with the edited ones: an archive that passes the
// checksums and holds rows the importer must refuse.
func editMember(t testing.TB, members []member, prefix, old, new string) []byte {
	t.Helper()
	c := slices.Clone(members)
	sums := map[string]string{}
	for i := range c[:len(c)-1] {
		if strings.HasPrefix(c[i].Name, prefix) {
			if !bytes.Contains(c[i].Data, []byte(old)) {
				t.Fatalf("%s has no %s", c[i].Name, old)
			}
			c[i].Data = bytes.ReplaceAll(c[i].Data, []byte(old), []byte(new))
			sum := sha256.Sum256(c[i].Data)
			sums[c[i].Name] = hex.EncodeToString(sum[:])
		}
	}
	if len(sums) == 0 {
		t.Fatalf("no member %s*", prefix)
	}
	var m map[string]any
	if err := json.Unmarshal(c[len(c)-1].Data, &m); err != nil {
		t.Fatal(err)
	}
	ms, _ := m["members"].([]any)
	for _, e := range ms {
		e, _ := e.(map[string]any)
		if name, _ := e["name"].(string); sums[name] != "" {
			e["sha256"] = sums[name]
			for _, x := range c {
				if x.Name == name {
					e["bytes"] = len(x.Data)
				}
			}
		}
	}
	c[len(c)-1] = member{Name: c[len(c)-1].Name, Data: jsonBody(m)}
	return writeArchive(t, c)
}

// providerIDs are an organization's identity providers' IDs.
func providerIDs(t testing.TB, env *servertest.Env, orgID string) []string {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT id FROM organization_identity_providers WHERE organization_id = $1`, orgID)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// editManifest rewrites an archive's manifest with edit.
func editManifest(t testing.TB, archive []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	members := readArchive(t, archive)
	last := &members[len(members)-1]
	var m map[string]any
	if err := json.Unmarshal(last.Data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	last.Data = jsonBody(m)
	return writeArchive(t, members)
}

// inventoryDigest is one digest per kind of what an organization holds, as PostgreSQL renders
// it, in a form that does not depend on the deployment (IDs of shared users are mapped by
// email; observations compared as JSON).
func inventoryDigest(t testing.TB, env *servertest.Env, orgID string) map[string]string {
	t.Helper()
	queries := map[string]string{
		// A document never written has no row: the defaults, '{}'.
		"settings": `SELECT coalesce((SELECT document::text FROM organization_settings WHERE organization_id = $1), '{}')`,
		"policy":   `SELECT coalesce((SELECT document::text FROM organization_policies WHERE organization_id = $1), '{}')`,
		"installations": `SELECT string_agg(json_build_object('id', id, 'public_key', encode(public_key, 'hex'), 'hostname', hostname,
			'os', os, 'registered_at', registered_at, 'last_seen_at', last_seen_at)::text, E'\n' ORDER BY id) FROM installations WHERE organization_id = $1`,
		"observation_batches": `SELECT string_agg(json_build_object('i', installation_id, 'b', batch_id, 'r', received_at)::text, E'\n'
			ORDER BY installation_id, batch_id) FROM observation_batches WHERE organization_id = $1`,
		"observations": `SELECT md5(string_agg(json_build_object('i', installation_id, 'b', batch_id, 'o', observed_at, 'r', received_at,
			'k', kind, 'd', data)::text, E'\n' ORDER BY id)) || ' ' || count(*) FROM observations WHERE organization_id = $1`,
		"completed jobs": `SELECT string_agg(json_build_object('id', id, 'i', installation_id, 'c', command, 's', state, 'cr', created_at,
			'd', delivered_at, 'co', completed_at, 'r', result)::text, E'\n' ORDER BY id) FROM jobs WHERE organization_id = $1 AND state IN ('succeeded', 'failed')`,
		// Their configuration (IDs, state and secret differ at the destination: checked apart).
		"identity providers": `SELECT string_agg(json_build_object('s', slug, 'p', protocol, 'i', issuer, 'n', display_name, 'c', client_id,
			'sc', scopes, 'd', allowed_email_domains, 'cr', created_at)::text, E'\n' ORDER BY slug) FROM organization_identity_providers WHERE organization_id = $1`,
	}
	out := map[string]string{}
	for kind, q := range queries {
		var s *string
		if err := env.Pool.QueryRow(context.Background(), q, orgID).Scan(&s); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if s != nil {
			out[kind] = *s
		}
	}
	return out
}

// emptyOrganization fails unless the organization holds nothing an import brings.
func expectEmpty(t testing.TB, env *servertest.Env, orgID string) {
	t.Helper()
	for _, table := range []string{"installations", "observations", "observation_batches", "jobs", "memberships", "pending_memberships",
		"transfers", "organization_identity_providers"} {
		if n := countRows(t, env, `SELECT count(*) FROM `+table+` WHERE organization_id = $1`, orgID); n != 0 {
			t.Errorf("%s: %d rows in the destination, want none", table, n)
		}
	}
	for _, table := range []string{"organization_settings", "organization_policies"} {
		if n := countRows(t, env, `SELECT count(*) FROM `+table+` WHERE organization_id = $1 AND version <> 1`, orgID); n != 0 {
			t.Errorf("%s changed", table)
		}
	}
}

// TestTransferRoundTrip: an organization with owners, settings, a policy, 3 installations,
// thousands of observations and jobs is exported, downloaded, imported into a second deployment
// (its own database and deployment identifier), and every row that should come back does; no
// credential travels; completing the move makes the source read-only and its agents 410.
func TestTransferRoundTrip(t *testing.T) {
	t.Parallel()
	src := servertest.Start(t, withDeploymentID("src1"))
	src.StartJobs(t)
	dst := servertest.Start(t, withDeploymentID("dst1"))
	srcToken, dstToken := src.Token(t, servertest.AllScopes()...), dst.Token(t, servertest.AllScopes()...)
	s := newSourceOrganization(t, src, srcToken, 10000)

	x := exportOrg(t, src, srcToken, s.OrgID)
	if x.Counts["installations"] != 3 || x.Counts["observations"] < 10000 || x.Counts["users"] != 2 || x.Counts["jobs"] != 2 || x.Counts["identity_providers"] != 2 ||
		x.Counts["memberships"] != 2 || x.Counts["organization"] != 1 || x.Progress.Bytes != *x.SizeBytes {
		t.Errorf("export counts %v, progress %+v", x.Counts, x.Progress)
	}
	archive := download(t, src, srcToken, x)

	// The archive: manifest last, with the source and a checksum of every member; not one
	// byte of any credential.
	members := readArchive(t, archive)
	var manifest domain.Manifest
	if err := json.Unmarshal(members[len(members)-1].Data, &manifest); err != nil || members[len(members)-1].Name != "manifest.json" {
		t.Fatalf("last member %s: %v", members[len(members)-1].Name, err)
	}
	if manifest.FormatVersion != 2 || manifest.Source.DeploymentID == nil || *manifest.Source.DeploymentID != "src1" ||
		manifest.Source.PublicURL != src.Config.PublicURL || manifest.Organization.ID != s.OrgID || len(manifest.Members) != len(members)-1 {
		t.Errorf("manifest %+v", manifest)
	}
	var all bytes.Buffer
	for i, m := range members[:len(members)-1] {
		sum := sha256.Sum256(m.Data)
		if manifest.Members[i].Name != m.Name || manifest.Members[i].SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("member %s: manifest says %+v", m.Name, manifest.Members[i])
		}
		all.Write(m.Data)
	}
	all.Write(members[len(members)-1].Data)
	for _, secret := range s.Secrets {
		if bytes.Contains(all.Bytes(), []byte(secret)) {
			t.Errorf("the archive holds a credential (%s...)", secret[:16])
		}
	}
	for _, word := range []string{"key_hash", "token_hash", "intake_key", "api_key", "invitation"} {
		if bytes.Contains(all.Bytes(), []byte(word)) {
			t.Errorf("the archive mentions %q", word)
		}
	}

	// The destination: an ordinary, empty organization.
	d := createOrg(t, dst, dstToken, newSlug(), "Arrived")
	ir := importReq(dstToken, d.ID, archive)
	rep := send(t, dst, ir)
	if rep.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", rep.Status, rep.Body)
	}
	// A retry with the same key replays the result and imports nothing again.
	if again := send(t, dst, ir); again.Status != http.StatusCreated || !bytes.Equal(again.Body, rep.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retried import: %d %s", again.Status, again.Body)
	}
	var imp transferJSON
	rep.decode(t, &imp)
	if imp.Kind != "import" || imp.State != "succeeded" || imp.OrganizationID != d.ID || *imp.SHA256 != *x.SHA256 ||
		imp.Counts["observations"] != x.Counts["observations"] {
		t.Errorf("import transfer %+v", imp)
	}
	want, got := inventoryDigest(t, src, s.OrgID), inventoryDigest(t, dst, d.ID)
	for kind := range want {
		if kind == "completed jobs" {
			continue // the queued job comes back failed: compared below
		}
		if want[kind] != got[kind] {
			t.Errorf("%s differ:\nsource      %.300s\ndestination %.300s", kind, want[kind], got[kind])
		}
	}
	if !strings.Contains(got["completed jobs"], want["completed jobs"]) {
		t.Errorf("the completed job did not come back as it was:\n%s\n%s", want["completed jobs"], got["completed jobs"])
	}
	// The organization's identity providers: the same configuration (compared above), disabled,
	// without a secret, under IDs of the destination's; the one enabled at the source says why.
	if want["identity providers"] == "" {
		t.Error("the source has no identity providers to compare")
	}
	var arrived []string
	rows, err := dst.Pool.Query(context.Background(), `SELECT slug || ' ' || state || ' ' || coalesce(disabled_reason, '-') || ' ' ||
			(client_secret IS NULL) || ' ' || (disabled_at IS NOT NULL) || ' ' || starts_with(id, 'oip_') || ' ' ||
			NOT EXISTS (SELECT 1 FROM organization_identity_providers WHERE organization_id <> $1 AND id = p.id)
		FROM organization_identity_providers p WHERE organization_id = $1 ORDER BY slug`, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if arrived, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if wantArrived := []string{"corp-sso disabled imported true true true true", "old-sso disabled owner true true true true"}; !slices.Equal(arrived, wantArrived) {
		t.Errorf("identity providers at the destination:\n%q\nwant\n%q", arrived, wantArrived)
	}
	var sourceIDs int
	if err := src.Pool.QueryRow(context.Background(), `SELECT count(*) FROM organization_identity_providers WHERE organization_id = $1
		AND id = ANY($2)`, s.OrgID, providerIDs(t, dst, d.ID)).Scan(&sourceIDs); err != nil || sourceIDs != 0 {
		t.Errorf("%d identity providers kept their source IDs (%v)", sourceIDs, err)
	}
	// An import is not cancelled or completed: those are an export's.
	send(t, dst, req{Method: http.MethodPost, Path: transferPath(imp.ID) + "/cancel", Token: dstToken}).expectProblem(t, http.StatusConflict, "invalid_transfer_state")
	send(t, dst, req{Method: http.MethodPost, Path: transferPath(imp.ID) + "/complete", Token: dstToken}).expectProblem(t, http.StatusConflict, "invalid_transfer_state")
	if n := countRows(t, dst, `SELECT count(*) FROM jobs WHERE organization_id = $1 AND state IN ('queued', 'delivered')`, d.ID); n != 0 {
		t.Errorf("%d imported jobs can run", n)
	}
	// Principal mapping: the owners are users here, with pending memberships that grant nothing.
	if n := countRows(t, dst, `SELECT count(*) FROM pending_memberships p JOIN users u ON u.id = p.user_id
		WHERE p.organization_id = $1 AND u.email IN ($2, $3)`, d.ID, s.Owners[0].User.Email, s.Owners[1].User.Email); n != 2 {
		t.Errorf("%d pending memberships of the owners, want 2", n)
	}
	for _, table := range []string{"memberships", "intake_keys", "user_api_keys", "invitations"} {
		if n := countRows(t, dst, `SELECT count(*) FROM `+table+` WHERE organization_id = $1`, d.ID); n != 0 {
			t.Errorf("%s: %d rows at the destination, want none", table, n)
		}
	}
	send(t, dst, req{Method: http.MethodGet, Path: "/api/v1/org/me", Token: s.Owners[0].APIKey}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	// Invited again at the destination, the owner is the imported user, with a real membership
	// in place of the pending one.
	_, secret, err := domain.CreateInvitation(context.Background(), dst.Pool, d.ID, s.Owners[0].User.Email)
	if err != nil {
		t.Fatal(err)
	}
	dst.Track(secret)
	back, err := domain.AcceptInvitation(context.Background(), dst.Pool, secret, "Owner again", domain.BuiltinDefaults)
	if err != nil {
		t.Fatal(err)
	}
	dst.Track(back.APIKey)
	if n := countRows(t, dst, `SELECT count(*) FROM pending_memberships WHERE organization_id = $1 AND user_id = $2`, d.ID, back.User.ID); n != 0 || !back.Joined {
		t.Errorf("after acceptance: %d pending memberships of the owner, joined %v", n, back.Joined)
	}
	if r := send(t, dst, req{Method: http.MethodGet, Path: "/api/v1/org/me", Token: back.APIKey}); r.Status != http.StatusOK {
		t.Errorf("the re-invited owner: %d %s", r.Status, r.Body)
	}
	// An agent continues at the destination with the same identity.
	moved := &specAgent{ID: s.Agents[2].ID, Pub: s.Agents[2].Pub, Priv: s.Agents[2].Priv, env: dst}
	moved.submit(t, batchBody("after-move", 2, 0)).accepted(t)
	dstAgent := &specAgent{ID: s.Agents[1].ID, Pub: s.Agents[1].Pub, Priv: s.Agents[1].Priv, env: dst}
	if r := dstAgent.do(t, http.MethodGet, agentJobsURL, nil); r.Status != http.StatusOK || !emptyItems(t, r) {
		t.Errorf("the imported queued job was delivered: %d %s", r.Status, r.Body)
	}

	// Completing the move at the source.
	done := send(t, src, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/complete", Token: srcToken,
		Body: jsonBody(map[string]string{"destination_url": "https://dst1.renga.example"})})
	if done.Status != http.StatusOK {
		t.Fatalf("complete: %d %s", done.Status, done.Body)
	}
	var c transferJSON
	done.decode(t, &c)
	if c.CompletedAt == nil || c.DestinationURL == nil || *c.DestinationURL != "https://dst1.renga.example" {
		t.Errorf("completed transfer %+v", c)
	}
	again := send(t, src, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/complete", Token: srcToken})
	if again.Status != http.StatusOK {
		t.Errorf("complete again: %d %s", again.Status, again.Body)
	}
	if st := storedLifecycle(t, src, s.OrgID); st.State != "moved" {
		t.Errorf("source organization %s, want moved", st.State)
	}
	if n := countRows(t, src, `SELECT count(*) FROM audit_events WHERE operation = 'completeTransfer' AND organization_id = $1 AND outcome = 'succeeded'`, s.OrgID); n != 2 {
		t.Errorf("%d audit events of completeTransfer, want 2", n)
	}
	s.Agents[0].submit(t, batchBody("too-late", 1, 0)).expectProblem(t, http.StatusGone, "moved")
	owner := s.Owners[0].APIKey
	send(t, src, settingsReq(owner, `"2"`, map[string]any{"require_mfa": false})).expectProblem(t, http.StatusForbidden, "moved")
	if r := send(t, src, req{Method: http.MethodGet, Path: settingsPath, Token: owner}); r.Status != http.StatusOK {
		t.Errorf("owner read of a moved organization: %d %s", r.Status, r.Body)
	}
	// The operator can still export the moved organization.
	exportOrg(t, src, srcToken, s.OrgID)
}

// TestDownloadCapability: single use, bound to its token, expired after its lifetime, void
// after token revocation and after cancel; never in any response but the one that created it.
func TestDownloadCapability(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	env.StartJobs(t)
	token := env.Token(t, servertest.AllScopes()...)
	_, other := scopedToken(t, env, "transfers:write")
	_, reader := scopedToken(t, env, "transfers:read")
	o := createOrg(t, env, token, newSlug(), "Capability")
	x := exportOrg(t, env, token, o.ID)

	// Scopes: transfers:read sees status only.
	send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/download-authorizations", Token: reader,
		Header: headers("Idempotency-Key", newKey())}).expectProblem(t, http.StatusForbidden, "insufficient_scope")
	// No Idempotency-Key: refused.
	send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/download-authorizations", Token: token}).
		expectProblem(t, http.StatusBadRequest, "idempotency_key_required")

	capability, created := authorize(t, env, token, x.ID)
	send(t, env, archiveReq(other, x.ID, capability)).expectProblem(t, http.StatusForbidden, "capability_invalid")
	send(t, env, archiveReq("", x.ID, capability)).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, env, archiveReq(token, x.ID, capability+"x")).expectProblem(t, http.StatusForbidden, "capability_invalid")
	send(t, env, archiveReq(token, x.ID, "")).expectProblem(t, http.StatusBadRequest, "invalid_request")
	if r := send(t, env, archiveReq(token, x.ID, capability)); r.Status != http.StatusOK || int64(len(r.Body)) != *x.SizeBytes {
		t.Fatalf("download: %d (%d bytes)", r.Status, len(r.Body))
	}
	send(t, env, archiveReq(token, x.ID, capability)).expectProblem(t, http.StatusForbidden, "capability_invalid")

	// A replay of the authorization does not show the capability again.
	key := newKey()
	first := send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/download-authorizations", Token: token, Header: headers("Idempotency-Key", key)})
	replayed := send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/download-authorizations", Token: token, Header: headers("Idempotency-Key", key)})
	var a struct {
		DownloadURL string `json:"download_url"`
	}
	first.decode(t, &a)
	env.Track(strings.SplitN(a.DownloadURL, "capability=", 2)[1])
	if replayed.Status != http.StatusCreated || replayed.Header.Get("Idempotent-Replayed") != "true" || bytes.Contains(replayed.Body, []byte("capability")) {
		t.Errorf("replayed authorization: %d %s", replayed.Status, replayed.Body)
	}

	// Expired.
	expired, _ := authorize(t, env, token, x.ID)
	if _, err := env.Pool.Exec(context.Background(), `UPDATE transfer_download_authorizations SET expires_at = now() - interval '1 second'
		WHERE capability_hash = $1`, domain.HashSecret(expired)); err != nil {
		t.Fatal(err)
	}
	send(t, env, archiveReq(token, x.ID, expired)).expectProblem(t, http.StatusForbidden, "capability_invalid")

	// Revoked token.
	_, revoking := scopedToken(t, env, "transfers:write")
	byRevoked, _ := authorize(t, env, revoking, x.ID)
	if r := send(t, env, req{Method: http.MethodPost, Path: selfPath + "/revoke", Token: revoking}); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	send(t, env, archiveReq(revoking, x.ID, byRevoked)).expectProblem(t, http.StatusUnauthorized, "unauthenticated")

	// Cancelled transfer: the authorization is void, the archive gone; cancelling again is success.
	beforeCancel, _ := authorize(t, env, token, x.ID)
	for range 2 {
		r := send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/cancel", Token: token})
		var c transferJSON
		r.decode(t, &c)
		if r.Status != http.StatusOK || c.State != "cancelled" || c.SHA256 != nil {
			t.Errorf("cancel: %d %s", r.Status, r.Body)
		}
	}
	send(t, env, archiveReq(token, x.ID, beforeCancel)).expectProblem(t, http.StatusForbidden, "capability_invalid")
	if n := countRows(t, env, `SELECT count(*) FROM transfer_chunks WHERE transfer_id = $1`, x.ID); n != 0 {
		t.Errorf("%d chunks after cancel", n)
	}
	send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/download-authorizations", Token: token,
		Header: headers("Idempotency-Key", newKey())}).expectProblem(t, http.StatusConflict, "invalid_transfer_state")

	// Every attempted download is audited: who, which organization, the outcome; never the
	// capability (the secret scan).
	type outcomeCount struct {
		Outcome string
		N       int
	}
	rows, err := env.Pool.Query(context.Background(), `SELECT outcome, count(*) FROM audit_events
		WHERE operation = 'getTransferArchive' AND (organization_id = $1 OR outcome = 'failed') GROUP BY outcome ORDER BY outcome`, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var oc outcomeCount
		if err := rows.Scan(&oc.Outcome, &oc.N); err != nil {
			t.Fatal(err)
		}
		got[oc.Outcome] = oc.N
	}
	rows.Close()
	// Succeeded: the one download. Denied: other token, wrong, used, expired, after cancel, and
	// not the revoked token's or the anonymous request's (refused by authentication, before
	// there is an actor to audit). Failed: the empty capability (400, before the transfer, so
	// without an organization).
	if got["succeeded"] != 1 || got["denied"] != 5 || got["failed"] != 1 {
		t.Errorf("download audit by outcome: %v", got)
	}

	// Status and lists never hold a capability (the secret scan at the end covers the logs,
	// the audit log, Activity, idempotency records and the transfer tables).
	_, st := getTransfer(t, env, reader, x.ID)
	list := send(t, env, req{Method: http.MethodGet, Path: transfersPath + "?organization_id=" + o.ID, Token: reader})
	for _, body := range [][]byte{st.Body, list.Body} {
		if bytes.Contains(body, []byte(domain.CapabilityPrefix)) || bytes.Contains(body, []byte("download_url")) {
			t.Errorf("a status response holds a capability: %s", body)
		}
	}
	if !bytes.Contains(created.Body, []byte(domain.CapabilityPrefix)) {
		t.Errorf("the authorization's own response has no capability: %s", created.Body)
	}
	var l struct {
		Items []transferJSON `json:"items"`
	}
	list.decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].ID != x.ID {
		t.Errorf("list: %s", list.Body)
	}
}

// TestImportRefusesDamagedArchives: a corrupted archive fails with a clear 400 code and leaves
// the destination empty; a non-empty destination is refused; of two concurrent imports one wins.
func TestImportRefusesDamagedArchives(t *testing.T) {
	t.Parallel()
	src := servertest.Start(t)
	src.StartJobs(t)
	dst := servertest.Start(t)
	srcToken, dstToken := src.Token(t, servertest.AllScopes()...), dst.Token(t, servertest.AllScopes()...)
	s := newSourceOrganization(t, src, srcToken, 600)
	archive := download(t, src, srcToken, exportOrg(t, src, srcToken, s.OrgID))
	members := readArchive(t, archive)

	flipped := bytes.Clone(archive)
	flipped[len(flipped)/2] ^= 0x40
	var missing []member
	for _, m := range members {
		if !strings.HasPrefix(m.Name, "installations/") {
			missing = append(missing, m)
		}
	}
	cases := []struct {
		name    string
		archive []byte
		code    string
	}{
		{"a byte flipped", flipped, "archive_corrupt"},
		{"truncated", archive[:len(archive)*2/3], "archive_corrupt"},
		{"not an archive", []byte("hello"), "archive_corrupt"},
		{"empty", []byte{}, "archive_corrupt"},
		{"a member missing", writeArchive(t, missing), "archive_member_missing"},
		{"a checksum wrong", editManifest(t, archive, func(m map[string]any) {
			ms, _ := m["members"].([]any)
			last, _ := ms[len(ms)-1].(map[string]any)
			last["sha256"] = strings.Repeat("0", 64)
		}), "archive_checksum_mismatch"},
		{"a member changed", func() []byte {
			c := append([]member(nil), members...)
			for i := range c {
				if strings.HasPrefix(c[i].Name, "observations/") {
					c[i].Data = bytes.Replace(c[i].Data, []byte(`"seq"`), []byte(`"sex"`), 1)
				}
			}
			return writeArchive(t, c)
		}(), "archive_checksum_mismatch"},
		{"an unknown version", editManifest(t, archive, func(m map[string]any) { m["format_version"] = 3 }), "archive_version_unsupported"},
		{"version 0", editManifest(t, archive, func(m map[string]any) { m["format_version"] = 0 }), "archive_version_unsupported"},
		// Version 1 had no identity providers.
		{"identity providers in a version 1 archive", editManifest(t, archive, func(m map[string]any) { m["format_version"] = 1 }), "archive_corrupt"},
		{"an identity provider that is not OIDC", editMember(t, members, "identity_providers/", `"oidc"`, `"saml"`), "archive_corrupt"},
		{"an identity provider with a plain-http issuer", editMember(t, members, "identity_providers/", `"https://`, `"http://`), "archive_corrupt"},
		{"an identity provider enabled with a reason", editMember(t, members, "identity_providers/", `"disabled"`, `"enabled"`), "archive_corrupt"},
		{"no manifest", writeArchive(t, members[:len(members)-1]), "archive_corrupt"},
		{"an unknown member", writeArchive(t, append([]member{{"secrets/000001.jsonl", []byte("{}\n")}}, members...)), "archive_corrupt"},
	}
	d := createOrg(t, dst, dstToken, newSlug(), "Destination")
	for _, c := range cases {
		rep := send(t, dst, importReq(dstToken, d.ID, c.archive))
		if rep.Status != http.StatusBadRequest || rep.problem(t).Error != c.code {
			t.Errorf("%s: %d %s, want 400 %s", c.name, rep.Status, rep.Body, c.code)
		}
		expectEmpty(t, dst, d.ID)
	}
	// An archive of format version 1 (one without identity providers, as servers before version
	// 2 wrote them) is still read.
	var v1 []member
	for _, m := range members {
		if !strings.HasPrefix(m.Name, "identity_providers/") {
			v1 = append(v1, m)
		}
	}
	v1Archive := editManifest(t, writeArchive(t, v1), func(m map[string]any) {
		m["format_version"] = 1
		counts, _ := m["counts"].(map[string]any)
		delete(counts, "identity_providers")
		ms, _ := m["members"].([]any)
		m["members"] = slices.DeleteFunc(ms, func(e any) bool {
			e1, _ := e.(map[string]any)
			name, _ := e1["name"].(string)
			return strings.HasPrefix(name, "identity_providers/")
		})
	})
	// (Into another deployment: the archive's installations come into this one below.)
	old := servertest.Start(t)
	oldToken := old.Token(t, servertest.AllScopes()...)
	d1 := createOrg(t, old, oldToken, newSlug(), "From version 1")
	if rep := send(t, old, importReq(oldToken, d1.ID, v1Archive)); rep.Status != http.StatusCreated {
		t.Errorf("version 1 archive: %d %s", rep.Status, rep.Body)
	}
	if n := countRows(t, old, `SELECT count(*) FROM installations WHERE organization_id = $1`, d1.ID); n != 3 || len(providerIDs(t, old, d1.ID)) != 0 {
		t.Errorf("version 1 archive: %d installations, %d identity providers", n, len(providerIDs(t, old, d1.ID)))
	}

	// Media type and scope.
	r := send(t, dst, req{Method: http.MethodPost, Path: orgPath(d.ID) + "/imports", Token: dstToken, Body: archive,
		Header: headers("Idempotency-Key", newKey(), "Content-Type", "application/json")})
	r.expectProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
	_, reader := scopedToken(t, dst, "transfers:read")
	send(t, dst, importReq(reader, d.ID, archive)).expectProblem(t, http.StatusForbidden, "insufficient_scope")
	send(t, dst, req{Method: http.MethodPost, Path: orgPath(d.ID) + "/imports", Token: dstToken, Body: archive,
		Header: headers("Content-Type", "application/octet-stream")}).expectProblem(t, http.StatusBadRequest, "idempotency_key_required")
	expectEmpty(t, dst, d.ID)
	if n := countRows(t, dst, `SELECT count(*) FROM audit_events WHERE operation = 'importOrganization' AND organization_id = $1 AND outcome = 'failed'`, d.ID); n < len(cases) {
		t.Errorf("%d failed imports audited, want at least %d", n, len(cases))
	}

	// Two concurrent imports into one organization: one wins, the other changes nothing.
	var wg sync.WaitGroup
	reps := make([]reply, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], _ = sendE(dst, importReq(dstToken, d.ID, archive))
		}()
	}
	wg.Wait()
	if count(reps, http.StatusCreated) != 1 || count(reps, http.StatusConflict) != 1 {
		t.Fatalf("concurrent imports: %v %s %s", codes(reps), reps[0].Body, reps[1].Body)
	}
	for _, r := range reps {
		if r.Status == http.StatusConflict {
			r.expectProblem(t, http.StatusConflict, "destination_not_empty")
		}
	}
	if n := countRows(t, dst, `SELECT count(*) FROM installations WHERE organization_id = $1`, d.ID); n != 3 {
		t.Errorf("%d installations after two imports, want 3", n)
	}
	// A non-empty destination is refused and unchanged.
	before := inventoryDigest(t, dst, d.ID)
	send(t, dst, importReq(dstToken, d.ID, archive)).expectProblem(t, http.StatusConflict, "destination_not_empty")
	after := inventoryDigest(t, dst, d.ID)
	for k := range before {
		if before[k] != after[k] {
			t.Errorf("%s changed by a refused import", k)
		}
	}
	// An organization with a member (and nothing else) is not empty either.
	e := createOrg(t, dst, dstToken, newSlug(), "Has an owner")
	addOwner(t, dst, dstToken, e.ID, "someone-"+random(4)+"@example.com", "Someone")
	send(t, dst, importReq(dstToken, e.ID, archive)).expectProblem(t, http.StatusConflict, "destination_not_empty")
	if n := countRows(t, dst, `SELECT count(*) FROM installations WHERE organization_id = $1`, e.ID); n != 0 {
		t.Errorf("%d installations in a refused destination", n)
	}
	// The deployment that still holds the archive's installations cannot take it: the detail says
	// why, and that a retry changes nothing.
	back := createOrg(t, src, srcToken, newSlug(), "Back home")
	p := send(t, src, importReq(srcToken, back.ID, archive)).expectProblem(t, http.StatusConflict, "archive_installations_present")
	if !strings.Contains(p.Detail, "already in this deployment") || !strings.Contains(p.Detail, "Retrying changes nothing") {
		t.Errorf("import into the source deployment: %q", p.Detail)
	}
	expectEmpty(t, src, back.ID)
	// Nor is one with an identity provider of its own (and no member left).
	f := createOrg(t, dst, dstToken, newSlug(), "Has a provider")
	setPolicy(t, dst, dstToken, f.ID, map[string]any{"entitlements": map[string]any{"organization_identity_providers": true}})
	if _, err := domain.CreateOrganizationProvider(context.Background(), dst.Pool, nil, f.ID, domain.NewProvider{Slug: "own", Protocol: "oidc",
		Issuer: "https://login.example.com", ProviderConfig: domain.ProviderConfig{DisplayName: "Own", ClientID: "c"}}, domain.BuiltinDefaults); err != nil {
		t.Fatal(err)
	}
	send(t, dst, importReq(dstToken, f.ID, archive)).expectProblem(t, http.StatusConflict, "destination_not_empty")
	if n := countRows(t, dst, `SELECT count(*) FROM installations WHERE organization_id = $1`, f.ID); n != 0 {
		t.Errorf("%d installations in a refused destination", n)
	}
}

// TestExportCancel: a pending export cancelled never runs; a running one notices, stops and
// leaves no archive; cancelling a failed export or an import is refused.
func TestExportCancel(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no job workers: this test runs the export's steps itself
	token := env.Token(t, servertest.AllScopes()...)
	ctx := context.Background()
	o := createOrg(t, env, token, newSlug(), "Cancelled")

	// A retried start (same Idempotency-Key) is the same export, and queues one job.
	key := newKey()
	first := send(t, env, req{Method: http.MethodPost, Path: orgPath(o.ID) + "/exports", Token: token, Header: headers("Idempotency-Key", key)})
	retry := send(t, env, req{Method: http.MethodPost, Path: orgPath(o.ID) + "/exports", Token: token, Header: headers("Idempotency-Key", key)})
	if first.Status != http.StatusAccepted || retry.Status != http.StatusAccepted || !bytes.Equal(first.Body, retry.Body) ||
		retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retried export: %d %s / %d %s", first.Status, first.Body, retry.Status, retry.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM transfers WHERE organization_id = $1`, o.ID); n != 1 {
		t.Errorf("%d transfers after a retried start, want 1", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM river_job WHERE kind = 'transfer_export'`); n != 1 {
		t.Errorf("%d export jobs after a retried start, want 1", n)
	}
	send(t, env, req{Method: http.MethodPost, Path: orgPath(o.ID) + "/exports", Token: token}).
		expectProblem(t, http.StatusBadRequest, "idempotency_key_required")

	pending := startExport(t, env, token, o.ID)
	send(t, env, req{Method: http.MethodPost, Path: transferPath(pending.ID) + "/cancel", Token: token}).expectProblemOrOK(t, http.StatusOK)
	if _, run, err := domain.StartExport(ctx, env.Pool, pending.ID); err != nil || run {
		t.Errorf("a cancelled export starts: %v %v", run, err)
	}

	// An organization whose archive takes several chunks (observations that do not compress).
	s := newSourceOrganization(t, env, token, 3)
	if _, err := env.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
		SELECT $1, $2, 'noise', now(), 'noise', jsonb_build_object('n', md5(random()::text) || md5(random()::text))
		FROM generate_series(1, 60000)`, s.OrgID, s.Agents[0].ID); err != nil {
		t.Fatal(err)
	}
	running := startExport(t, env, token, s.OrgID)
	tr, run, err := domain.StartExport(ctx, env.Pool, running.ID)
	if err != nil || !run {
		t.Fatalf("start: %v %v", run, err)
	}
	cancel := send(t, env, req{Method: http.MethodPost, Path: transferPath(running.ID) + "/cancel", Token: token})
	cancel.expectProblemOrOK(t, http.StatusOK)
	if err := domain.RunExport(ctx, env.Pool, tr, domain.ArchiveSource{PublicURL: env.Config.PublicURL}); err != nil {
		t.Fatalf("run a cancelled export: %v", err)
	}
	x, _ := getTransfer(t, env, token, running.ID)
	if x.State != "cancelled" || x.SHA256 != nil || x.Progress.Bytes > 0 {
		t.Errorf("after cancel: %+v", x)
	}
	if n := countRows(t, env, `SELECT count(*) FROM transfer_chunks WHERE transfer_id = $1`, running.ID); n != 0 {
		t.Errorf("%d chunks left by a cancelled export", n)
	}
	// The same export, not cancelled, takes several chunks: the cancelled one stopped early.
	full := startExport(t, env, token, s.OrgID)
	tr, _, err = domain.StartExport(ctx, env.Pool, full.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.RunExport(ctx, env.Pool, tr, domain.ArchiveSource{PublicURL: env.Config.PublicURL}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, env, `SELECT count(*) FROM transfer_chunks WHERE transfer_id = $1`, full.ID); n < 3 {
		t.Errorf("the archive takes %d chunks, want several", n)
	}
	// Far above the 1 MiB of a JSON body, the archive imports: its body is streamed.
	archive := download(t, env, token, waitTransfer(t, env, token, full.ID))
	if len(archive) <= pipeline.MaxBodyBytes*2 {
		t.Fatalf("archive of %d bytes, want more than 2 MiB", len(archive))
	}
	dst := servertest.Start(t)
	dstToken := dst.Token(t, servertest.AllScopes()...)
	d := createOrg(t, dst, dstToken, newSlug(), "Large")
	if r := send(t, dst, importReq(dstToken, d.ID, archive)); r.Status != http.StatusCreated {
		t.Errorf("import of %d bytes: %d %s", len(archive), r.Status, r.Body)
	}
	if n := countRows(t, dst, `SELECT count(*) FROM observations WHERE organization_id = $1`, d.ID); n < 60000 {
		t.Errorf("%d observations imported", n)
	}
}

// TestImportInterrupted: an upload cut off at any point leaves the destination empty (the
// import is one transaction; the server rolls it back whatever stopped it).
func TestImportInterrupted(t *testing.T) {
	t.Parallel()
	src := servertest.Start(t)
	src.StartJobs(t)
	srcToken := src.Token(t, servertest.AllScopes()...)
	s := newSourceOrganization(t, src, srcToken, 3000)
	archive := download(t, src, srcToken, exportOrg(t, src, srcToken, s.OrgID))
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	d := createOrg(t, env, token, newSlug(), "Interrupted")
	for i, cut := range []int{1, 3, 5, 7, 9} {
		at := len(archive) * cut / 10
		pr, pw := io.Pipe()
		hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost, env.URL+orgPath(d.ID)+"/imports", pr)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+token)
		hr.Header.Set("Content-Type", "application/octet-stream")
		hr.Header.Set("Idempotency-Key", newKey())
		go func() {
			_, _ = pw.Write(archive[:at])
			time.Sleep(50 * time.Millisecond)
			pw.CloseWithError(errors.New("the uploader went away"))
		}()
		if resp, err := httpClient.Do(hr); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("cut at %d%%: %d", cut*10, resp.StatusCode)
			}
		}
		waitFor(t, 10*time.Second, "the failed import to be audited", func() bool {
			return countRows(t, env, `SELECT count(*) FROM audit_events WHERE operation = 'importOrganization' AND organization_id = $1`, d.ID) == i+1
		})
		expectEmpty(t, env, d.ID)
	}
	if r := send(t, env, importReq(token, d.ID, archive)); r.Status != http.StatusCreated {
		t.Errorf("the whole archive after interrupted ones: %d %s", r.Status, r.Body)
	}
}

// TestImportOutlastsReadTimeout: the deployment's HTTP server bounds how long a request may take
// to arrive; an import's body streams for as long as the archive takes, so the import lifts
// that deadline (and the archive download its write deadline). Here the server allows one
// second and the upload takes about three.
func TestImportOutlastsReadTimeout(t *testing.T) {
	t.Parallel()
	src := servertest.Start(t)
	src.StartJobs(t)
	srcToken := src.Token(t, servertest.AllScopes()...)
	s := newSourceOrganization(t, src, srcToken, 300)
	archive := download(t, src, srcToken, exportOrg(t, src, srcToken, s.OrgID))

	dst := servertest.Start(t)
	token := dst.Token(t, servertest.AllScopes()...)
	d := createOrg(t, dst, token, newSlug(), "Slow upload")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: dst.Server.Handler(), ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	pr, pw := io.Pipe()
	go func() {
		const parts = 5
		for i := range parts {
			_, _ = pw.Write(archive[len(archive)*i/parts : len(archive)*(i+1)/parts])
			time.Sleep(600 * time.Millisecond)
		}
		_ = pw.Close()
	}()
	hr, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+orgPath(d.ID)+"/imports", pr)
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Content-Type", "application/octet-stream")
	hr.Header.Set("Idempotency-Key", newKey())
	start := time.Now()
	resp, err := httpClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || time.Since(start) < 2*time.Second {
		t.Errorf("slow import: %d after %s: %s", resp.StatusCode, time.Since(start), body)
	}
}

// TestExportedObservationsArePostgresJSON: the export writes each observation's line itself
// (domain.renderObservation), and each is, byte for byte, the line PostgreSQL's row_to_json
// writes of the same row, with every kind of text a string can hold (quotes, backslashes, each
// control character, non-ASCII, U+2028) and every shape of time (fractions with trailing zeros
// trimmed, whole seconds, years before 1000, BC, after 9999, infinity). Each line reads back
// through encoding/json.
func TestExportedObservationsArePostgresJSON(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no job workers: the export's steps run here
	token := env.Token(t, servertest.AllScopes()...)
	ctx := context.Background()
	o, ins := orgWithInstallation(t, env, token, "Rendered")
	var control strings.Builder
	for c := range 0x20 {
		control.WriteByte(byte(c))
	}
	texts := []string{"plain", `quote " and backslash \ and slash /`, control.String() + "\x7f", "é ü 日本 🙂",
		"line\u2028separator\u2029", "<html> & 'single'", "", strings.Repeat("long ", 200)}
	times := []string{"2026-12-04 10:39:21.365473+00", "2026-01-01 00:00:00.1+00", "2026-01-01 00:00:00.12+00",
		"2026-01-01 00:00:00+00", "2026-06-30 23:59:59.999999+02", "0099-01-01 00:00:00.000001+00",
		"0001-01-01 00:00:00+00 BC", "0002-06-01 12:00:00.5+00 BC", "10000-01-01 00:00:00+00", "infinity", "-infinity"}
	for i, text := range texts {
		for j, at := range times {
			data := fmt.Sprintf(`{"text": %q, "n": %d, "f": 1.50, "nested": {"a": [1, null, true]}}`, text, i*100+j)
			if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
				data = `{"n": 0}` // jsonb cannot hold NUL; the text columns carry it below
			}
			colText := strings.ReplaceAll(text, "\x00", "") // nor can text
			if _, err := env.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, received_at, kind, data)
				VALUES ($1, $2, $3, $4::timestamptz, $4::timestamptz, $5, $6::jsonb)`, o.ID, ins, "batch "+colText, at, "kind "+colText, data); err != nil {
				t.Fatalf("observation %q at %s: %v", text, at, err)
			}
		}
	}
	x := startExport(t, env, token, o.ID)
	tr, _, err := domain.StartExport(ctx, env.Pool, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.RunExport(ctx, env.Pool, tr, domain.ArchiveSource{PublicURL: env.Config.PublicURL}); err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, m := range readArchive(t, download(t, env, token, waitTransfer(t, env, token, x.ID))) {
		if strings.HasPrefix(m.Name, "observations/") {
			exported = append(exported, strings.Split(strings.TrimSuffix(string(m.Data), "\n"), "\n")...)
		}
	}
	var want []string
	if err := pgx.BeginFunc(ctx, env.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'UTC'`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT row_to_json(r)::text FROM observations o, LATERAL (SELECT o.installation_id,
			o.batch_id, o.observed_at, o.received_at, o.kind, o.data) r WHERE o.organization_id = $1 ORDER BY o.id`, o.ID)
		if err != nil {
			return err
		}
		want, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(texts)*len(times) || len(exported) != len(want) {
		t.Fatalf("%d lines exported, %d rows, want %d", len(exported), len(want), len(texts)*len(times))
	}
	for i := range want {
		if exported[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, exported[i], want[i])
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(exported[i]), &v); err != nil || !strings.HasPrefix(fmt.Sprint(v["kind"]), "kind ") {
			t.Errorf("line %d does not read back: %v (%v)", i+1, err, v["kind"])
		}
	}
}

// TestExportAllocatesLittlePerObservation: an export's rows leave next to no garbage (with the
// server's GOGC of 400 an export's heap grows to five times what it holds live, and each row's
// garbage is what lets it). Scan's arguments made for each row were three allocations a row.
// Not parallel: parallel tests wait while it runs, so the process's allocation count is the
// export's (and this idle server's).
func TestExportAllocatesLittlePerObservation(t *testing.T) {
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	ctx := context.Background()
	o, ins := orgWithInstallation(t, env, token, "Allocations")
	const rows = 20000
	if _, err := env.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, received_at, kind, data)
		SELECT $1, $2, 'b' || (g / 100), now(), now(), 'cpu', jsonb_build_object('n', g) FROM generate_series(1, $3) g`,
		o.ID, ins, rows); err != nil {
		t.Fatal(err)
	}
	x := startExport(t, env, token, o.ID)
	tr, _, err := domain.StartExport(ctx, env.Pool, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := domain.RunExport(ctx, env.Pool, tr, domain.ArchiveSource{PublicURL: env.Config.PublicURL}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if perRow := float64(after.Mallocs-before.Mallocs) / rows; perRow > 0.5 {
		t.Errorf("the export made %.2f allocations per observation, want at most 0.5", perRow)
	}
}

// orgWithInstallation creates an organization named name with one installation, written directly
// (its observations are the caller's to insert), and returns the organization and the
// installation's ID.
func orgWithInstallation(t *testing.T, env *servertest.Env, token, name string) (organization, string) {
	t.Helper()
	o := createOrg(t, env, token, newSlug(), name)
	ins := "ins_" + strings.Repeat("r", 26)
	if _, err := env.Pool.Exec(context.Background(), `INSERT INTO installations (id, organization_id, public_key, hostname, os)
		VALUES ($1, $2, $3, 'h', 'linux')`, ins, o.ID, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	return o, ins
}
