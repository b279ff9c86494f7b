package server

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"renga.dev/renga/gen/api"
)

// FuzzOrganizationAnswerIsTheGenerated: organizationAnswer writes what the generated responses
// (a GET's 200, a create's 201) write for the same organization and headers: status, every header, the body byte for byte, and
// the same error; text needing escapes (HTML, U+2028, invalid UTF-8, control characters), times
// of every precision, zone and year (0-9999 appended by hand, any other left to the generated
// response, which refuses years it cannot write).
func FuzzOrganizationAnswerIsTheGenerated(f *testing.F) {
	f.Add("org_01jc3x9m1h7r4v5n8q2w6e0t9y", "acme", "Acme Corporation", "active", "", false, int64(1764590400123456789), int64(0), false, int64(1), "", int64(0))
	f.Add("org_1", "a-b", "<b>&amp;</b> \u2028\"\\\x01\xff é😀", "suspended", "unpaid <invoice>", true, int64(0), int64(-62135596800000000), true, int64(-9), "UTC", int64(3600))
	f.Add("", "", "", "", "", false, int64(253402300800000000), int64(253402300799999999), true, int64(9223372036854775807), "Europe/Paris", int64(0))
	f.Add("x", "y", "z", "deletion_pending", "\t\n", true, int64(-62167219200000000-1), int64(1), true, int64(2), "fixed", int64(-1800))
	f.Fuzz(func(t *testing.T, id, slug, name, state, reason string, hasReason bool, created, purge int64, hasPurge bool, version int64, zone string, offset int64) {
		loc := time.UTC
		switch zone {
		case "fixed":
			loc = time.FixedZone("", int(offset%86400))
		case "Europe/Paris":
			if l, err := time.LoadLocation(zone); err == nil {
				loc = l
			}
		}
		o := api.Organization{Id: id, Slug: slug, DisplayName: name, State: state, Version: version,
			CreatedAt: time.Unix(0, created).In(loc), UpdatedAt: time.Unix(0, created).UTC().Add(time.Duration(offset))}
		if hasReason {
			o.SuspendedReason = &reason
		}
		if hasPurge {
			p := time.UnixMicro(purge).UTC()
			o.PurgeAfter = &p
		}
		tag, where := etag(version), "/api/v1/operator/organizations/"+id
		a := organizationAnswer{body: o, etag: tag, location: &where}
		for _, c := range []struct {
			name      string
			got, want func(http.ResponseWriter) error
		}{
			{"get", organizationAnswer{body: o, etag: tag}.VisitGetOrganizationResponse,
				api.GetOrganization200JSONResponse{Body: o, Headers: api.GetOrganization200ResponseHeaders{ETag: tag}}.VisitGetOrganizationResponse},
			{"create", a.VisitCreateOrganizationResponse,
				api.CreateOrganization201JSONResponse{Body: o, Headers: api.CreateOrganization201ResponseHeaders{ETag: tag, Location: &where}}.VisitCreateOrganizationResponse},
		} {
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			gotErr, wantErr := c.got(got), c.want(want)
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("%s: error %v, the generated response's %v", c.name, gotErr, wantErr)
			}
			if got.Code != want.Code || got.Body.String() != want.Body.String() {
				t.Fatalf("%s: got %d %q\nwant %d %q", c.name, got.Code, got.Body, want.Code, want.Body)
			}
			if !maps.EqualFunc(got.Header(), want.Header(), slices.Equal) {
				t.Fatalf("%s: headers %v, want %v", c.name, got.Header(), want.Header())
			}
		}
	})
}
