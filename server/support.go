package server

import (
	"context"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

// The support console (RFD 22 support access), outside the API: server-rendered pages, no
// script, the sign-in pages' CSP. A support person (a deployment session whose person the
// support source names) sees the organizations whose owners granted them access, and reads
// each one's inventory read-only:
//
//	GET /support                                                    the organizations granted now
//	GET /support/organizations/{id}[?after=]                        its agents
//	GET /support/organizations/{id}/agents/{installation_id}[?before=]  an agent's observations
//	GET /support/organizations/{id}/jobs[?before=]                  its jobs
//	GET /support/organizations/{id}/settings                        its security settings
//
// Lists come in pages (agents in registration order, observations and jobs newest first); a
// full page links the next one by the cursor of its last row, so every row can be reached.
//
// Every page of an organization checks its grant, records the read (audit and the
// organization's Activity: who, what, when) and reads, in one transaction: without an active
// grant it is 403 and nothing is read or shown; if the read cannot be recorded, nothing is
// shown either. Pages are GETs only: the console changes nothing.
const supportPath = "/support"

// Operations of the console's reads, as the audit and the Activity name them.
const (
	opSupportListAgents       = "supportListAgents"
	opSupportListObservations = "supportListObservations"
	opSupportListJobs         = "supportListJobs"
	opSupportGetSettings      = "supportGetSettings"
)

// What one page of each list shows; a full page links the next.
const (
	supportAgentsShown       = 500
	supportObservationsShown = 50
	supportJobsShown         = 100
)

//go:embed support.html
var supportHTML string

var supportPage = template.Must(template.New("support").Funcs(pageFuncs).Funcs(template.FuncMap{
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
	"timep": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 MST")
	},
}).Parse(supportHTML))

type supportView struct {
	Title        string
	Refusal      string
	Session      *domain.DeploymentSession
	Granted      []domain.GrantedOrganization
	Organization *domain.GrantedOrganization
	Section      string
	Agents       []domain.Installation
	Installation string
	Observations []domain.Observation
	Jobs         []domain.Job
	Settings     *domain.Settings
	Locked       []string
	Next         string // the list's next page, when this one is full and more follow
}

var (
	supportOrgID          = regexp.MustCompile(`^org_[0-9a-z]{26}$`)
	supportInstallationID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	supportJobID          = regexp.MustCompile(`^job_[0-9a-z]{26}$`)
)

// errBadPage: a page's cursor (after, before) that no page of the console links.
var errBadPage = errors.New("not a page of this list")

func (s *Server) mountSupport(mux *routeMux, pl *pipeline.Pipeline) {
	mux.Handle("GET "+supportPath, pl.Public(http.HandlerFunc(s.supportHome)))
	mux.Handle("GET "+supportPath+"/organizations/{organization_id}", pl.Public(s.supportRead(opSupportListAgents, s.readAgents)))
	mux.Handle("GET "+supportPath+"/organizations/{organization_id}/agents/{installation_id}",
		pl.Public(s.supportRead(opSupportListObservations, s.readObservations)))
	mux.Handle("GET "+supportPath+"/organizations/{organization_id}/jobs", pl.Public(s.supportRead(opSupportListJobs, s.readJobs)))
	mux.Handle("GET "+supportPath+"/organizations/{organization_id}/settings", pl.Public(s.supportRead(opSupportGetSettings, s.readSettings)))
}

func (s *Server) renderSupport(w http.ResponseWriter, status int, v supportView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", signInCSP)
	w.WriteHeader(status)
	_ = supportPage.Execute(w, v)
}

// supportRefuse renders a refusal: 403 for a support person without access, 503 when the
// database is unreachable, 500 otherwise (logged, never shown).
func (s *Server) supportRefuse(w http.ResponseWriter, r *http.Request, status int, reason string, err error) {
	if err != nil {
		switch {
		case db.Unavailable(err):
			status, reason = http.StatusServiceUnavailable, "The deployment cannot reach its database right now; try again later."
			w.Header().Set("Retry-After", "2")
		default:
			status, reason = http.StatusInternalServerError, "The support console failed on the deployment's side; try again later."
		}
		s.log.WarnContext(r.Context(), "support console", "request_id", pipeline.From(r.Context()).ID, "path", r.URL.Path, "error", err)
	}
	s.renderSupport(w, status, supportView{Title: "Refused", Refusal: reason})
}

// supportSession is the request's support person, or false after answering: a browser with
// no live session goes to sign in.
func (s *Server) supportSession(w http.ResponseWriter, r *http.Request) (domain.DeploymentSession, bool) {
	secret := s.cookie(r, SessionCookie)
	if secret == "" {
		http.Redirect(w, r, signInPath, http.StatusSeeOther)
		return domain.DeploymentSession{}, false
	}
	sess, _, err := s.liveSession(r.Context(), secret)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		http.Redirect(w, r, signInPath, http.StatusSeeOther)
		return sess, false
	case err != nil:
		s.supportRefuse(w, r, 0, "", err)
		return sess, false
	}
	return sess, true
}

// supportHome lists the organizations whose owners let this support person in now. It shows
// grants only, no inventory: nothing to record.
func (s *Server) supportHome(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.supportSession(w, r)
	if !ok {
		return
	}
	list, err := domain.GrantedOrganizations(r.Context(), s.pool, sess.Email)
	if err != nil {
		s.supportRefuse(w, r, 0, "", err)
		return
	}
	s.renderSupport(w, http.StatusOK, supportView{Title: "Support console", Session: &sess, Granted: list})
}

// A supportReader reads one section of an organization's inventory into v, in tx.
type supportReader func(ctx context.Context, tx pgx.Tx, r *http.Request, o domain.GrantedOrganization, v *supportView) error

// supportRead serves one read of an organization: the support person, their grant, the read's
// record and the read, in one transaction.
func (s *Server) supportRead(operation string, read supportReader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.supportSession(w, r)
		if !ok {
			return
		}
		ctx := r.Context()
		orgID := r.PathValue("organization_id")
		noGrant := "No active support grant from this organization's owners lets you read it."
		if !supportOrgID.MatchString(orgID) {
			s.supportRefuse(w, r, http.StatusForbidden, noGrant, nil)
			return
		}
		st := pipeline.From(ctx)
		v := supportView{Session: &sess}
		err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
			o, err := domain.GrantedOrganizationByID(ctx, tx, sess.Email, orgID)
			if err != nil {
				return err
			}
			v.Organization, v.Title = &o, o.DisplayName
			if err := read(ctx, tx, r, o, &v); err != nil {
				return err
			}
			return domain.RecordAudit(ctx, tx, domain.SupportRead(sess, o, operation, st.ID, sourceString(st)))
		})
		switch {
		case errors.Is(err, domain.ErrNotFound):
			s.log.InfoContext(ctx, "support read refused", "request_id", st.ID, "session_id", sess.ID, "organization_id", orgID, "operation", operation)
			s.supportRefuse(w, r, http.StatusForbidden, noGrant, nil)
			return
		case errors.Is(err, errNoSuchInstallation):
			s.supportRefuse(w, r, http.StatusNotFound, "This organization has no such agent.", nil)
			return
		case errors.Is(err, errBadPage):
			s.supportRefuse(w, r, http.StatusBadRequest, "This is not a page of the list: open the list again from its first page.", nil)
			return
		case err != nil:
			s.supportRefuse(w, r, 0, "", err)
			return
		}
		s.log.InfoContext(ctx, "support read", "request_id", st.ID, "session_id", sess.ID, "organization_id", orgID, "operation", operation)
		s.renderSupport(w, http.StatusOK, v)
	})
}

var errNoSuchInstallation = errors.New("no such installation in the organization")

func (s *Server) readAgents(ctx context.Context, tx pgx.Tx, r *http.Request, o domain.GrantedOrganization, v *supportView) error {
	after, ok := cursor(r, "after", supportInstallationID)
	if !ok {
		return errBadPage
	}
	agents, err := domain.ListInstallations(ctx, tx, o.ID, after, supportAgentsShown+1)
	v.Agents, v.Next = onePage(agents, supportAgentsShown, func(last domain.Installation) string {
		return supportPath + "/organizations/" + o.ID + "?after=" + url.QueryEscape(last.ID)
	})
	v.Section = "agents"
	return err
}

// onePage is the first size of rows, read one past a page, and the link to the next page (made
// by next from the page's last row) when there was that one more; "" when this page is the last.
func onePage[T any](rows []T, size int, next func(last T) string) ([]T, string) {
	if len(rows) <= size {
		return rows, ""
	}
	return rows[:size], next(rows[size-1])
}

// cursor is the page cursor named name of r's query: "" on a list's first page, and false when
// it is there but not of the form pattern (or given twice).
func cursor(r *http.Request, name string, pattern *regexp.Regexp) (string, bool) {
	values, ok := r.URL.Query()[name]
	switch {
	case !ok:
		return "", true
	case len(values) != 1 || !pattern.MatchString(values[0]):
		return "", false
	}
	return values[0], true
}

func (s *Server) readObservations(ctx context.Context, tx pgx.Tx, r *http.Request, o domain.GrantedOrganization, v *supportView) error {
	id := r.PathValue("installation_id")
	if !supportInstallationID.MatchString(id) {
		return errNoSuchInstallation
	}
	before, ok := cursor(r, "before", supportObservationCursor)
	if !ok {
		return errBadPage
	}
	var from *domain.ObservationID
	if before != "" {
		last, ok := domain.ParseObservationID(before)
		if !ok { // an obs_<n> past int64, or 26 characters of no ID
			return errBadPage
		}
		from = &last
	}
	obs, err := domain.ListObservations(ctx, tx, o.ID, id, from, supportObservationsShown+1)
	if errors.Is(err, domain.ErrNotFound) {
		return errNoSuchInstallation
	}
	v.Observations, v.Next = onePage(obs, supportObservationsShown, func(last domain.Observation) string {
		return supportPath + "/organizations/" + o.ID + "/agents/" + url.PathEscape(id) + "?before=" + last.ID.String()
	})
	v.Section, v.Installation = "observations", id
	return err
}

// supportObservationCursor is an observation's ID, of either form (domain.ObservationID).
var supportObservationCursor = regexp.MustCompile(`^obs_([1-9][0-9]{0,18}|[0-9a-z]{26})$`)

func (s *Server) readJobs(ctx context.Context, tx pgx.Tx, r *http.Request, o domain.GrantedOrganization, v *supportView) error {
	before, ok := cursor(r, "before", supportJobID)
	if !ok {
		return errBadPage
	}
	jobs, err := domain.ListJobs(ctx, tx, o.ID, before, supportJobsShown+1)
	v.Jobs, v.Next = onePage(jobs, supportJobsShown, func(last domain.Job) string {
		return supportPath + "/organizations/" + o.ID + "/jobs?before=" + url.QueryEscape(last.ID)
	})
	v.Section = "jobs"
	return err
}

func (s *Server) readSettings(ctx context.Context, tx pgx.Tx, _ *http.Request, o domain.GrantedOrganization, v *supportView) error {
	p, err := domain.GetPolicy(ctx, tx, o.ID)
	if err != nil {
		return err
	}
	set, err := domain.GetSettings(ctx, tx, o.ID)
	if err != nil {
		return err
	}
	locks := domain.Effective(p.Document, s.cfg.PolicyDefaults, set.Settings).Locks()
	applied := set.Settings.Applied(locks)
	v.Section, v.Settings = "settings", &applied
	for name := range locks {
		v.Locked = append(v.Locked, name.Name())
	}
	slices.Sort(v.Locked)
	return nil
}
