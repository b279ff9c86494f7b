package domain

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A provider configuration's checks, shared by stored and environment providers.

var (
	providerSlugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	emailDomainPattern  = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	scopePattern        = regexp.MustCompile(`^[\x21\x23-\x5b\x5d-\x7e]{1,100}$`)
)

// DefaultProviderScopes are the scopes a provider requests when its configuration names none.
var DefaultProviderScopes = []string{"openid", "email", "profile"}

// CheckIssuer accepts an issuer URL: https, or http to a loopback address (development and
// tests), with a host, no query, fragment or credentials.
func CheckIssuer(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return &ValidationError{Field: "issuer", Message: "must be an absolute URL"}
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return &ValidationError{Field: "issuer", Message: "must have no credentials, query or fragment"}
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return &ValidationError{Field: "issuer", Message: "must be https (http only to a loopback address)"}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// normalized fills defaults and checks what the spec's schemas cannot: scopes include openid
// and appear once; email domains appear once.
func (c ProviderConfig) normalized() (ProviderConfig, error) {
	if len(c.Scopes) == 0 {
		c.Scopes = slices.Clone(DefaultProviderScopes)
	}
	if !slices.Contains(c.Scopes, "openid") {
		return c, &ValidationError{Field: "scopes", Message: "must include openid"}
	}
	for i, s := range c.Scopes {
		if !scopePattern.MatchString(s) {
			return c, &ValidationError{Field: "scopes", Message: fmt.Sprintf("%q is not a scope", s)}
		}
		if slices.Contains(c.Scopes[:i], s) {
			return c, &ValidationError{Field: "scopes", Message: fmt.Sprintf("%q appears twice", s)}
		}
	}
	if c.AllowedEmailDomains == nil {
		c.AllowedEmailDomains = []string{}
	}
	for i, d := range c.AllowedEmailDomains {
		if !emailDomainPattern.MatchString(d) {
			return c, &ValidationError{Field: "allowed_email_domains", Message: fmt.Sprintf("%q is not a lowercase domain", d)}
		}
		if slices.Contains(c.AllowedEmailDomains[:i], d) {
			return c, &ValidationError{Field: "allowed_email_domains", Message: fmt.Sprintf("%q appears twice", d)}
		}
	}
	// Lengths in characters, as the spec's maxLength counts them (not bytes).
	if strings.TrimSpace(c.DisplayName) == "" || utf8.RuneCountInString(c.DisplayName) > 100 {
		return c, &ValidationError{Field: "display_name", Message: "must be 1 to 100 characters, not only spaces"}
	}
	if c.ClientID == "" || utf8.RuneCountInString(c.ClientID) > 255 {
		return c, &ValidationError{Field: "client_id", Message: "must be 1 to 255 characters"}
	}
	return c, nil
}
