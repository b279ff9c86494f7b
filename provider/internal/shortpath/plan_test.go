package shortpath_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/acctest"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/provider"
	"renga.dev/renga/provider/internal/shortpath"
)

// TestSamePlansAndApplies: for renga_organization and renga_organization_policy, the provider's
// server (provider.Server) answers PlanResourceChange and ApplyResourceChange exactly as the
// framework's own server does, through the sequences Terraform runs against a real server:
// create, no-op, update in place, replace (RequiresReplace, then delete and create), destroy,
// configurations with unknown values (an organization_id known only after apply), defaults
// (overwrite_existing) and nested attributes (limits, locked_settings' set, entitlements), with
// deferral allowed, errors from the API (a slug already taken, a policy that is not empty, a
// 412 after a change made outside Terraform, a token without the scope), a plan after an
// import (private state) and plans of a provider that is not configured.
//
// Each call goes to the framework's server first, whose API client talks to the real server
// and records every exchange; then to provider.Server, whose client must send the same
// requests in the same order and is answered the recorded responses. The two answers are
// compared whole: states' bytes, requires-replace paths, private state, diagnostics.
//
// Fails when: the shorter path answers anything differently, sends the API anything
// differently, or answers too few of the calls itself (the test would then compare the
// framework with itself).
func TestSamePlansAndApplies(t *testing.T) {
	env := acctest.Start(t)
	ctx := context.Background()
	tp := &tape{t: t, real: http.DefaultTransport}
	p := newPair(t, tp, env.URL, env.Token)

	org := p.resource(t, "renga_organization")
	pol := p.resource(t, "renga_organization_policy")
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	unknownString := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, n) }
	boolean := func(b bool) tftypes.Value { return tftypes.NewValue(tftypes.Bool, b) }

	// renga_organization: create (with deferral allowed), no-op, update, replace, destroy.
	slug := acctest.Name("plan")
	cfg := org.value(t, map[string]tftypes.Value{"slug": str(slug), "display_name": str("One")})
	created := p.planApply(t, "create organization", org, cfg, org.null(), nil)
	p.plan(t, "organization no-op", org, cfg, created, nil)
	renamed := org.value(t, map[string]tftypes.Value{"slug": str(slug), "display_name": str("Two")})
	updated := p.planApply(t, "rename organization", org, renamed, created, nil)
	p.plan(t, "organization with deferral allowed", org, cfg, updated, &tfprotov6.PlanResourceChangeClientCapabilities{DeferralAllowed: true})
	p.plan(t, "organization, display name unknown", org,
		org.value(t, map[string]tftypes.Value{"slug": str(slug), "display_name": unknownString}), updated, nil)
	p.plan(t, "organization, slug unknown", org,
		org.value(t, map[string]tftypes.Value{"slug": unknownString, "display_name": str("Two")}), updated, nil)
	p.plan(t, "create organization, all unknown", org,
		org.value(t, map[string]tftypes.Value{"slug": unknownString, "display_name": unknownString}), org.null(), nil)
	moved := org.value(t, map[string]tftypes.Value{"slug": str(slug + "-b"), "display_name": str("Two")})
	replacePlan := p.plan(t, "replace organization", org, moved, updated, nil)
	if len(replacePlan.RequiresReplace) != 1 {
		t.Errorf("replace organization: requires replace %v", replacePlan.RequiresReplace)
	}
	p.apply(t, "replace organization: destroy", org, org.null(), updated, org.null())
	replaced := p.planApply(t, "replace organization: create", org, moved, org.null(), nil)
	p.planApply(t, "destroy organization", org, org.null(), replaced, nil)

	// Errors from the API: a slug taken, a rename after a change outside Terraform (412).
	taken := env.CreateOrganization(t, acctest.Name("taken"), "Taken")
	p.planApply(t, "create organization, slug taken", org,
		org.value(t, map[string]tftypes.Value{"slug": str(taken.Slug), "display_name": str("Taken")}), org.null(), nil)
	slug2 := acctest.Name("plan")
	second := p.planApply(t, "create second organization", org,
		org.value(t, map[string]tftypes.Value{"slug": str(slug2), "display_name": str("Second")}), org.null(), nil)
	var secondAttrs map[string]tftypes.Value
	if err := second.As(&secondAttrs); err != nil {
		t.Fatal(err)
	}
	var orgID string
	if err := secondAttrs["id"].As(&orgID); err != nil {
		t.Fatal(err)
	}
	if res, err := env.API.UpdateOrganizationWithResponse(ctx, orgID,
		&client.UpdateOrganizationParams{IfMatch: `"1"`}, client.OrganizationUpdate{DisplayName: "Outside"}); err != nil || res.JSON200 == nil {
		t.Fatalf("rename outside Terraform: %v %v", err, res)
	}
	p.planApply(t, "rename organization changed outside Terraform", org,
		org.value(t, map[string]tftypes.Value{"slug": str(slug2), "display_name": str("Third")}), second, nil)

	// renga_organization_policy: create with organization_id unknown (planned with the
	// organization), then known; nested attributes; the default; no-op; update; 412; destroy.
	limits := pol.attrType(t, "limits")
	locked := pol.attrType(t, "locked_settings")
	entitlements := pol.attrType(t, "entitlements")
	domains := func(ds ...string) tftypes.Value {
		var vs []tftypes.Value
		for _, d := range ds {
			vs = append(vs, str(d))
		}
		return tftypes.NewValue(tftypes.Set{ElementType: tftypes.String}, vs)
	}
	doc := func(orgID tftypes.Value, maxAgents int64, jobs bool, extra map[string]tftypes.Value) tftypes.Value {
		attrs := map[string]tftypes.Value{
			"organization_id": orgID,
			"limits":          object(t, limits, map[string]tftypes.Value{"max_agents": num(maxAgents), "max_users": num(10)}),
			"entitlements":    object(t, entitlements, map[string]tftypes.Value{"jobs": boolean(jobs)}),
		}
		for k, v := range extra {
			attrs[k] = v
		}
		return pol.value(t, attrs)
	}
	p.plan(t, "create policy, organization unknown", pol, doc(unknownString, 100, true, nil), pol.null(), nil)
	polCreated := p.planApply(t, "create policy", pol, doc(str(orgID), 100, true, nil), pol.null(), nil)
	p.plan(t, "policy no-op", pol, doc(str(orgID), 100, true, nil), polCreated, nil)
	withSet := doc(str(orgID), 101, false, map[string]tftypes.Value{
		"locked_settings": object(t, locked, map[string]tftypes.Value{"allowed_email_domains": domains("b.example", "a.example"), "require_mfa": boolean(true)}),
	})
	polUpdated := p.planApply(t, "update policy", pol, withSet, polCreated, nil)
	p.plan(t, "policy no-op with a set", pol, withSet, polUpdated, nil)
	overwrite := doc(str(orgID), 101, false, map[string]tftypes.Value{
		"locked_settings":    object(t, locked, map[string]tftypes.Value{"allowed_email_domains": domains("b.example", "a.example"), "require_mfa": boolean(true)}),
		"overwrite_existing": boolean(true),
	})
	polOverwrite := p.planApply(t, "policy overwrite_existing only", pol, overwrite, polUpdated, nil)
	p.plan(t, "policy, limits unknown", pol, pol.value(t, map[string]tftypes.Value{
		"organization_id": str(orgID), "limits": tftypes.NewValue(limits, tftypes.UnknownValue),
	}), polOverwrite, nil)
	p.plan(t, "policy, a limit unknown", pol, pol.value(t, map[string]tftypes.Value{
		"organization_id": str(orgID), "limits": object(t, limits, map[string]tftypes.Value{"max_agents": tftypes.NewValue(tftypes.Number, tftypes.UnknownValue)}),
	}), polOverwrite, nil)
	p.plan(t, "policy moved to another organization", pol, doc(str(taken.Id), 1, true, nil), polOverwrite, nil)
	if _, err := env.PutPolicy(orgID, client.PolicyWrite{Limits: &client.PolicyLimits{MaxAgents: ptr(int64(3))}}); err != nil {
		t.Fatal(err)
	}
	p.planApply(t, "update policy changed outside Terraform", pol, doc(str(orgID), 7, true, nil), polOverwrite, nil)
	p.planApply(t, "create policy over one not empty", pol, doc(str(orgID), 7, true, nil), pol.null(), nil)
	p.planApply(t, "destroy policy changed outside Terraform", pol, pol.null(), polOverwrite, nil)

	// A plan and an apply the API refuses (a token without policies:write).
	noScope := newPair(t, tp, env.URL, env.Server.Token(t, "organizations:write"))
	noScope.planApply(t, "create policy without the scope", pol, doc(str(taken.Id), 1, true, nil), pol.null(), nil)

	// After an import: the state has private data, the framework's to plan.
	imported := p.importRead(t, "renga_organization", orgID)
	p.plan(t, "organization after import", org,
		org.value(t, map[string]tftypes.Value{"slug": str(slug2), "display_name": str("Outside")}), imported.state, nil, imported.private...)

	// A provider not configured yet (the framework's: it defers or fails its own way).
	unconfigured := &pair{tape: tp,
		framework: providerserver.NewProtocol6(provider.New("test", tp.option(true))())(),
		wrapped:   provider.Server("test", tp.option(false))()}
	unconfigured.plan(t, "unconfigured: create organization", org, cfg, org.null(), nil)

	for _, call := range []string{"PlanResourceChange", "ApplyResourceChange"} {
		n := shortpath.AnsweredCalls(p.wrapped, call) + shortpath.AnsweredCalls(noScope.wrapped, call)
		t.Logf("the shorter path answered %d %s calls", n, call)
		if n < 12 {
			t.Errorf("the shorter path answered %d %s calls; the comparison is mostly of the framework with itself", n, call)
		}
	}
}

// pair is the framework's server and provider.Server, configured alike; the framework's API
// client records on tape, provider.Server's plays it back.
type pair struct {
	framework, wrapped tfprotov6.ProviderServer
	tape               *tape
	schemas            *tfprotov6.GetProviderSchemaResponse
}

func newPair(t *testing.T, tp *tape, url, token string) *pair {
	t.Helper()
	p := &pair{tape: tp,
		framework: providerserver.NewProtocol6(provider.New("test", tp.option(true))())(),
		wrapped:   provider.Server("test", tp.option(false))()}
	tp.record()
	configure(t, p.framework, url, token)
	tp.play()
	configure(t, p.wrapped, url, token)
	tp.done()
	schemas, err := p.framework.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p.schemas = schemas
	return p
}

// resourceSchema is a resource type's protocol schema.
type resourceSchema struct {
	name   string
	schema *tfprotov6.Schema
	typ    tftypes.Object
}

func (p *pair) resource(t *testing.T, name string) resourceSchema {
	t.Helper()
	s := p.schemas.ResourceSchemas[name]
	if s == nil {
		t.Fatalf("no schema for %s", name)
	}
	typ, ok := s.ValueType().(tftypes.Object)
	if !ok {
		t.Fatalf("%s: not an object", name)
	}
	return resourceSchema{name: name, schema: s, typ: typ}
}

func (r resourceSchema) null() tftypes.Value { return tftypes.NewValue(r.typ, nil) }

// value is an object of r's type with attrs, the other attributes null.
func (r resourceSchema) value(t *testing.T, attrs map[string]tftypes.Value) tftypes.Value {
	t.Helper()
	return object(t, r.typ, attrs)
}

func (r resourceSchema) attrType(t *testing.T, name string) tftypes.Object {
	t.Helper()
	o, ok := r.typ.AttributeTypes[name].(tftypes.Object)
	if !ok {
		t.Fatalf("%s.%s: not an object", r.name, name)
	}
	return o
}

func object(t *testing.T, typ tftypes.Object, attrs map[string]tftypes.Value) tftypes.Value {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	for name, v := range attrs {
		if _, ok := vals[name]; !ok {
			t.Fatalf("no attribute %s", name)
		}
		vals[name] = v
	}
	return tftypes.NewValue(typ, vals)
}

// proposedNew is Terraform's proposed new state (objchange.ProposedNew) for these schemas:
// a computed attribute null in the configuration keeps its prior value, every other takes the
// configuration's. A null configuration (destroy) proposes null.
func (r resourceSchema) proposedNew(t *testing.T, config, prior tftypes.Value) tftypes.Value {
	t.Helper()
	if config.IsNull() {
		return config
	}
	var cfg, old map[string]tftypes.Value
	if err := config.As(&cfg); err != nil {
		t.Fatal(err)
	}
	if !prior.IsNull() {
		if err := prior.As(&old); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]tftypes.Value{}
	for _, a := range r.schema.Block.Attributes {
		out[a.Name] = cfg[a.Name]
		if a.Computed && cfg[a.Name].IsNull() {
			if v, ok := old[a.Name]; ok {
				out[a.Name] = v
			}
		}
	}
	return tftypes.NewValue(r.typ, out)
}

func dynamic(t *testing.T, typ tftypes.Type, v tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	dv, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// plan asks both servers for a plan of config over prior (with private, if any), and returns
// the framework's answer.
func (p *pair) plan(t *testing.T, what string, r resourceSchema, config, prior tftypes.Value, caps *tfprotov6.PlanResourceChangeClientCapabilities, private ...[]byte) *tfprotov6.PlanResourceChangeResponse {
	t.Helper()
	proposed := r.proposedNew(t, config, prior)
	req := func() *tfprotov6.PlanResourceChangeRequest {
		rq := &tfprotov6.PlanResourceChangeRequest{TypeName: r.name, Config: dynamic(t, r.typ, config),
			PriorState: dynamic(t, r.typ, prior), ProposedNewState: dynamic(t, r.typ, proposed), ClientCapabilities: caps}
		for _, pr := range private {
			rq.PriorPrivate = append([]byte(nil), pr...)
		}
		return rq
	}
	p.tape.record()
	fr, err := p.framework.PlanResourceChange(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	p.tape.play()
	wr, err := p.wrapped.PlanResourceChange(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	p.tape.done()
	same(t, "plan "+what, fr, wr)
	return fr
}

// apply asks both servers to apply planned (config over prior), and returns the framework's
// new state.
func (p *pair) apply(t *testing.T, what string, r resourceSchema, config, prior, planned tftypes.Value, private ...[]byte) tftypes.Value {
	t.Helper()
	req := func() *tfprotov6.ApplyResourceChangeRequest {
		rq := &tfprotov6.ApplyResourceChangeRequest{TypeName: r.name, Config: dynamic(t, r.typ, config),
			PriorState: dynamic(t, r.typ, prior), PlannedState: dynamic(t, r.typ, planned)}
		for _, pr := range private {
			rq.PlannedPrivate = append([]byte(nil), pr...)
		}
		return rq
	}
	p.tape.record()
	fr, err := p.framework.ApplyResourceChange(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	p.tape.play()
	wr, err := p.wrapped.ApplyResourceChange(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	p.tape.done()
	same(t, "apply "+what, fr, wr)
	if fr.NewState == nil {
		return r.null()
	}
	v, err := fr.NewState.Unmarshal(r.typ)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// planApply plans config over prior and, when the plan has no error, applies it; it returns
// the new state (prior when nothing was applied).
func (p *pair) planApply(t *testing.T, what string, r resourceSchema, config, prior tftypes.Value, caps *tfprotov6.PlanResourceChangeClientCapabilities) tftypes.Value {
	t.Helper()
	plan := p.plan(t, what, r, config, prior, caps)
	for _, d := range plan.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			t.Fatalf("plan %s: %s: %s", what, d.Summary, d.Detail)
		}
	}
	planned, err := plan.PlannedState.Unmarshal(r.typ)
	if err != nil {
		t.Fatal(err)
	}
	return p.apply(t, what, r, config, prior, planned)
}

type importedState struct {
	state   tftypes.Value
	private [][]byte
}

// importRead imports id with the framework (it makes no API call) and reads it with both.
func (p *pair) importRead(t *testing.T, typeName, id string) importedState {
	t.Helper()
	ctx := context.Background()
	imp, err := p.framework.ImportResourceState(ctx, &tfprotov6.ImportResourceStateRequest{TypeName: typeName, ID: id})
	if err != nil || len(imp.ImportedResources) != 1 || len(imp.ImportedResources[0].Private) == 0 {
		t.Fatalf("import: %v %+v", err, imp)
	}
	ir := imp.ImportedResources[0]
	read := func() *tfprotov6.ReadResourceRequest {
		return &tfprotov6.ReadResourceRequest{TypeName: typeName, CurrentState: ir.State, Private: append([]byte(nil), ir.Private...)}
	}
	p.tape.record()
	fr, err := p.framework.ReadResource(ctx, read())
	if err != nil {
		t.Fatal(err)
	}
	p.tape.play()
	wr, err := p.wrapped.ReadResource(ctx, read())
	if err != nil {
		t.Fatal(err)
	}
	p.tape.done()
	same(t, "read after import", fr, wr)
	r := p.resource(t, typeName)
	v, err := fr.NewState.Unmarshal(r.typ)
	if err != nil {
		t.Fatal(err)
	}
	return importedState{state: v, private: [][]byte{fr.Private}}
}

// tape records the API exchanges of the framework's server and plays them back to
// provider.Server, checking that it sends the same requests.
type tape struct {
	t    *testing.T
	real http.RoundTripper

	mu        sync.Mutex
	recording bool
	exchanges []exchange
	next      int
}

type exchange struct {
	request  string // method, URL, the headers that matter, body
	status   int
	header   http.Header
	response []byte
}

// option gives the provider's API client the tape: to record (the framework's) or to play.
func (tp *tape) option(record bool) provider.Option {
	return func(c *apiclient.Config) {
		if record {
			c.Transport = recorder{tp}
		} else {
			c.Transport = player{tp}
		}
	}
}

func (tp *tape) record() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.recording, tp.exchanges, tp.next = true, nil, 0
}

func (tp *tape) play() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.recording = false
}

// done checks that every exchange recorded was played.
func (tp *tape) done() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.next != len(tp.exchanges) {
		tp.t.Errorf("provider.Server made %d of the framework's %d API requests", tp.next, len(tp.exchanges))
	}
}

// describeRequest is what must match of two requests, and the body read (and put back).
func describeRequest(req *http.Request) (string, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return "", err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return fmt.Sprintf("%s %s If-Match=%q Idempotency-Key=%q Authorization=%q\n%s", req.Method, req.URL,
		req.Header.Get("If-Match"), req.Header.Get("Idempotency-Key"), req.Header.Get("Authorization"), body), nil
}

type recorder struct{ *tape }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	desc, err := describeRequest(req)
	if err != nil {
		return nil, err
	}
	res, err := r.real.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recording {
		r.exchanges = append(r.exchanges, exchange{request: desc, status: res.StatusCode, header: res.Header.Clone(), response: body})
	}
	return res, nil
}

type player struct{ *tape }

func (p player) RoundTrip(req *http.Request) (*http.Response, error) {
	desc, err := describeRequest(req)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= len(p.exchanges) {
		p.t.Errorf("provider.Server made a request the framework did not:\n%s", desc)
		return nil, fmt.Errorf("not on the tape: %s %s", req.Method, req.URL)
	}
	x := p.exchanges[p.next]
	p.next++
	if x.request != desc {
		p.t.Errorf("provider.Server's request differs from the framework's:\nframework: %s\nwrapped:   %s", x.request, desc)
	}
	return &http.Response{
		Status: http.StatusText(x.status), StatusCode: x.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: x.header.Clone(), Body: io.NopCloser(bytes.NewReader(x.response)), ContentLength: int64(len(x.response)), Request: req,
	}, nil
}
