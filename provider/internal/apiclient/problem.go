package apiclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"renga.dev/renga/gen/client"
)

// Response is what every generated response has.
type Response interface {
	StatusCode() int
	GetBody() []byte
}

// Problem decodes the application/problem+json body of an error response. ok is false when the
// body is not one (a proxy's error page, say).
func Problem(r Response) (p client.Problem, ok bool) {
	if err := json.Unmarshal(r.GetBody(), &p); err != nil || p.Error == "" {
		return client.Problem{Status: r.StatusCode()}, false
	}
	return p, true
}

// AddError adds the diagnostic for a call that did not get the answer it wanted: a transport
// error (err), or an error response. action says what was being done ("create organization
// \"acme\"").
func AddError(diags *diag.Diagnostics, action string, r Response, err error) {
	summary, detail := Describe(action, r, err)
	diags.AddError(summary, detail)
}

// Describe is AddError's summary and detail.
func Describe(action string, r Response, err error) (summary, detail string) {
	if err != nil {
		return "Cannot reach the Renga API",
			fmt.Sprintf("Could not %s: %v.\n\nCheck the provider's url (or RENGA_URL) and that the deployment is running.", action, err)
	}
	status := r.StatusCode()
	if status >= 200 && status < 300 {
		return "Unexpected response from the Renga API",
			fmt.Sprintf("Could not %s: HTTP %d without the JSON body the API describes.", action, status)
	}
	p, ok := Problem(r)
	switch status {
	case http.StatusUnauthorized:
		return "Renga rejected the operator token",
			fmt.Sprintf("Could not %s: 401 unauthenticated. The token is missing, malformed, unknown, expired, revoked, or not allowed from this address (the server does not say which).\n\nCheck the provider's token (or RENGA_OPERATOR_TOKEN); mint a new one with `renga operator-token create`.%s", action, requestID(p))
	case http.StatusForbidden:
		switch client.ErrorCode(p.Error) {
		case client.ErrorCodeInsufficientScope:
			scope := "(not named)"
			if p.RequiredScope != nil {
				scope = *p.RequiredScope
			}
			return fmt.Sprintf("The operator token lacks the %s scope", scope),
				fmt.Sprintf("Could not %s: the operator token needs the scope %s. Mint a token that has it, e.g. `renga operator-token create --name terraform --scope %s ...`.%s", action, scope, scope, requestID(p))
		case client.ErrorCodeHttpsRequired:
			return "Renga requires HTTPS",
				fmt.Sprintf("Could not %s: this deployment accepts requests over HTTPS only. Use an https:// url.%s", action, requestID(p))
		}
	case http.StatusNotFound:
		return "Not found in Renga", fmt.Sprintf("Could not %s: it does not exist (404).%s", action, requestID(p))
	case http.StatusTooManyRequests:
		return "Renga is rate limiting this token",
			fmt.Sprintf("Could not %s: 429 rate_limited, still after retrying. Lower -parallelism or raise the deployment's RENGA_RATE_LIMIT_AUTHENTICATED.%s", action, requestID(p))
	}
	if !ok {
		body := strings.TrimSpace(string(r.GetBody()))
		if len(body) > 300 {
			body = body[:300] + "..."
		}
		return "Unexpected response from the Renga API",
			fmt.Sprintf("Could not %s: HTTP %d with a body that is not a problem document: %s", action, status, body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Could not %s: %d %s", action, status, p.Error)
	if p.Detail != nil && *p.Detail != "" {
		fmt.Fprintf(&b, ": %s", *p.Detail)
	} else if p.Title != "" {
		fmt.Fprintf(&b, ": %s", p.Title)
	}
	if p.Errors != nil {
		for _, e := range *p.Errors {
			fmt.Fprintf(&b, "\n  - %s: %s", e.Field, e.Message)
		}
	}
	b.WriteString(requestID(p))
	return "Renga API error (" + string(p.Error) + ")", b.String()
}

func requestID(p client.Problem) string {
	if p.RequestId == "" {
		return ""
	}
	return "\n\n(request " + p.RequestId + ")"
}

// CurrentVersion is the version a 412 version_mismatch reports, or -1.
func CurrentVersion(r Response) int64 {
	if p, ok := Problem(r); ok && client.ErrorCode(p.Error) == client.ErrorCodeVersionMismatch && p.CurrentVersion != nil {
		return *p.CurrentVersion
	}
	return -1
}

// AddChangedOutsideTerraform adds the diagnostic of a 412 to a write made with If-Match from
// state: title names the object ("Policy changed outside Terraform"), what names it in the
// sentence ("the policy"), why may say what else changes it ("" for nothing); held is the
// version Terraform last read.
func AddChangedOutsideTerraform(diags *diag.Diagnostics, title, action, what, why string, r Response, held int64) {
	if why != "" {
		why = " (" + why + ")"
	}
	diags.AddError(title, fmt.Sprintf("Could not %s: %s changed outside Terraform. The server holds version %d, but Terraform last read version %d: "+
		"someone changed it since%s. Nothing was overwritten and the write was not retried.\n\n"+
		"Run `terraform plan` (or `terraform apply -refresh-only`) to refresh and review the change, then apply again.",
		action, what, CurrentVersion(r), held, why))
}
