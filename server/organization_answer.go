package server

import (
	"net/http"
	"strconv"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/jsonquote"
)

// organizationAnswer is GetOrganization's 200 and CreateOrganization's 201: what
// api.GetOrganization200JSONResponse and api.CreateOrganization201JSONResponse write for the same
// organization and headers, status, headers and body byte for byte
// (FuzzOrganizationAnswerIsTheGenerated), with the organization appended by hand where the
// generated responses encode it by reflection (encoding/json was about a twentieth of an
// authenticated GET's CPU in a profile under load). A time encoding/json writes otherwise than
// appendTime (not UTC, or a year outside 0-9999, which it refuses) is left to the generated
// response.
type organizationAnswer struct {
	body     api.Organization
	etag     *string
	location *string // the create's
}

// VisitGetOrganizationResponse implements api.GetOrganizationResponseObject.
func (a organizationAnswer) VisitGetOrganizationResponse(w http.ResponseWriter) error {
	if written, err := a.write(w, http.StatusOK); written {
		return err
	}
	return api.GetOrganization200JSONResponse{Body: a.body,
		Headers: api.GetOrganization200ResponseHeaders{ETag: a.etag}}.VisitGetOrganizationResponse(w)
}

// VisitCreateOrganizationResponse implements api.CreateOrganizationResponseObject.
func (a organizationAnswer) VisitCreateOrganizationResponse(w http.ResponseWriter) error {
	if written, err := a.write(w, http.StatusCreated); written {
		return err
	}
	return api.CreateOrganization201JSONResponse{Body: a.body,
		Headers: api.CreateOrganization201ResponseHeaders{ETag: a.etag, Location: a.location}}.VisitCreateOrganizationResponse(w)
}

// write writes the answer with status and returns the write's error, as the generated
// responses do; or writes nothing and reports false if the body is the generated response's to
// write.
func (a organizationAnswer) write(w http.ResponseWriter, status int) (bool, error) {
	b, ok := appendOrganization(make([]byte, 0, 512), &a.body)
	if !ok {
		return false, nil
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if a.etag != nil {
		h["Etag"] = []string{*a.etag}
	}
	if a.location != nil {
		h["Location"] = []string{*a.location}
	}
	w.WriteHeader(status)
	_, err := w.Write(b)
	return true, err
}

// appendOrganization appends o as json.Encoder writes it (fields in api.Organization's order,
// HTML escaped, a newline after), or reports false.
func appendOrganization(b []byte, o *api.Organization) ([]byte, bool) {
	ok := true
	b = append(b, `{"created_at":`...)
	b, ok = appendTime(b, o.CreatedAt, ok)
	b = append(b, `,"display_name":`...)
	b = jsonquote.Marshal(b, o.DisplayName)
	b = append(b, `,"id":`...)
	b = jsonquote.Marshal(b, o.Id)
	b = append(b, `,"purge_after":`...)
	if o.PurgeAfter == nil {
		b = append(b, "null"...)
	} else {
		b, ok = appendTime(b, *o.PurgeAfter, ok)
	}
	b = append(b, `,"slug":`...)
	b = jsonquote.Marshal(b, o.Slug)
	b = append(b, `,"state":`...)
	b = jsonquote.Marshal(b, o.State)
	b = append(b, `,"suspended_reason":`...)
	if o.SuspendedReason == nil {
		b = append(b, "null"...)
	} else {
		b = jsonquote.Marshal(b, *o.SuspendedReason)
	}
	b = append(b, `,"updated_at":`...)
	b, ok = appendTime(b, o.UpdatedAt, ok)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, o.Version, 10)
	b = append(b, "}\n"...)
	return b, ok
}

// appendTime appends t as time.Time's MarshalJSON writes a UTC time of years 0-9999 (RFC 3339
// with as many fractional digits as it needs); any other time sets ok false.
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	if y := t.Year(); t.Location() != time.UTC || y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}
