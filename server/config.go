// Package server is the Renga deployment server: configuration, the HTTP pipeline every request
// goes through, the handlers implementing the generated strict interface, and background work.
package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/secretbox"
)

// Environments.
const (
	EnvProduction  = "production"
	EnvDevelopment = "development"
)

// Config is the server's configuration, read from RENGA_* variables.
type Config struct {
	Environment          string
	Listen               string
	PublicURL            string
	DatabaseURL          string
	DataDir              string
	DeploymentID         string
	TLSCertFile          string
	TLSKeyFile           string
	TrustedProxies       []netip.Prefix
	DeletionGracePeriod  time.Duration
	IdempotencyRetention time.Duration
	// Per-credential limit on authenticated requests (requests/s and burst); 0 disables.
	RateLimitAuthenticated      float64
	RateLimitAuthenticatedBurst int
	// Per-source-address limit on unauthenticated requests.
	RateLimitAnonymous      float64
	RateLimitAnonymousBurst int
	DatabaseMaxConns        int32
	// IntakeStatements is how many intake statements run at once, at most; batches that arrive
	// while one runs go together in the next, and a statement more starts only for what one
	// group cannot carry (domain.IntakeGroups).
	IntakeStatements int
	// IntakePath is whether intake's batches go together (RENGA_INTAKE_GROUP_COMMIT: on, the
	// default, groups batches that arrive while a statement runs; off sends each alone; always
	// sends each in a group's statement): what a test selects to run intake through one path.
	IntakePath domain.IntakePath
	// RequestTimeout bounds each API request, its database statements included (0: none).
	RequestTimeout time.Duration
	// MaxInFlight bounds the API requests served at once (0: no bound).
	MaxInFlight int
	// LogFlushInterval is the longest a log line below Warn waits to be written with the lines
	// after it (server/logbuf); 0 writes each line as it is logged.
	LogFlushInterval time.Duration
	// HTTP are the connection timeouts (DefaultHTTPTimeouts; not read from the environment).
	HTTP    HTTPTimeouts
	Version string
	// PolicyDefaults are the deployment's defaults (RENGA_POLICY_DEFAULTS over the built-in ones).
	PolicyDefaults domain.PolicyDocument
	// SMTPURL is where mail goes (smtp://[user:password@]host:port); without it, mail is written
	// as .eml files under DataDir/mail.
	SMTPURL       *url.URL
	MailFrom      string
	PurgeInterval time.Duration
	// Secrets seals the secrets the deployment must keep readable (RENGA_SECRET_KEY, and
	// RENGA_SECRET_KEY_PREVIOUS while rotating). Nil only for a release command run without it.
	Secrets *secretbox.Box
	// IdentityProviders are the environment's providers (RENGA_IDENTITY_PROVIDERS), read-only.
	IdentityProviders []domain.EnvProvider
	// ProviderCacheFreshness bounds how old a provider's discovery document and keys may be
	// when a sign-in uses them (0: DefaultProviderCacheFreshness). Past it they are fetched
	// again, and a provider that cannot be reached then fails the sign-in (closed).
	ProviderCacheFreshness time.Duration
}

// DefaultLogFlushInterval is how long a log line below Warn may wait to be written with the
// lines after it: under load, one write(2) per 64 KiB of lines instead of one per line.
const DefaultLogFlushInterval = 100 * time.Millisecond

// MaxLogFlushInterval bounds RENGA_LOG_FLUSH_INTERVAL: the lines lost with a killed process.
const MaxLogFlushInterval = 10 * time.Second

// DefaultProviderCacheFreshness is how long a provider's discovery document and keys serve
// sign-in before they are fetched again.
const DefaultProviderCacheFreshness = 10 * time.Minute

// Development reports whether the server runs in development mode.
func (c Config) Development() bool { return c.Environment == EnvDevelopment }

// ConfigError names the variable that is wrong.
type ConfigError struct {
	Variable string
	Problem  string
}

func (e *ConfigError) Error() string { return e.Variable + ": " + e.Problem }

var deploymentIDPattern = regexp.MustCompile(`^[a-z0-9-]{1,16}$`)

// Mode is what the configuration is loaded for.
type Mode int

// Modes.
const (
	// ModeServe is `renga serve`: everything serving needs must be set.
	ModeServe Mode = iota
	// ModeDev is `renga serve --dev`: development, with defaults for a private deployment.
	ModeDev
	// ModeRelease is a release command on the server host: it serves no network, so TLS and the
	// public URL are not required (but are reported when set).
	ModeRelease
)

// LoadConfig reads the environment through getenv for mode. Every bad variable is reported,
// each by name.
func LoadConfig(getenv func(string) string, mode Mode) (Config, error) {
	l := &loader{getenv: getenv, mode: mode}
	c := Config{
		Environment:                 EnvProduction,
		Listen:                      ":8080",
		DeletionGracePeriod:         720 * time.Hour,
		IdempotencyRetention:        24 * time.Hour,
		RateLimitAuthenticated:      1000,
		RateLimitAuthenticatedBurst: 2000,
		RateLimitAnonymous:          10,
		RateLimitAnonymousBurst:     50,
		PurgeInterval:               time.Minute,
		RequestTimeout:              30 * time.Second,
		MaxInFlight:                 256,
		LogFlushInterval:            DefaultLogFlushInterval,
		IntakeStatements:            2,
		HTTP:                        DefaultHTTPTimeouts,
	}
	if mode == ModeDev {
		c.Environment = EnvDevelopment
		c.Listen = "127.0.0.1:8080"
		c.DataDir = ".renga"
	}
	l.environment(&c)
	l.addresses(&c)
	l.tls(&c)
	l.duration("RENGA_DELETION_GRACE_PERIOD", &c.DeletionGracePeriod, 0)
	l.duration("RENGA_IDEMPOTENCY_RETENTION", &c.IdempotencyRetention, 24*time.Hour)
	l.number("RENGA_RATE_LIMIT_AUTHENTICATED", &c.RateLimitAuthenticated)
	l.integer("RENGA_RATE_LIMIT_AUTHENTICATED_BURST", &c.RateLimitAuthenticatedBurst)
	l.number("RENGA_RATE_LIMIT_ANONYMOUS", &c.RateLimitAnonymous)
	l.integer("RENGA_RATE_LIMIT_ANONYMOUS_BURST", &c.RateLimitAnonymousBurst)
	var err error
	if c.PolicyDefaults, err = domain.ParsePolicyDefaults(getenv("RENGA_POLICY_DEFAULTS")); err != nil {
		l.bad("RENGA_POLICY_DEFAULTS", "%v", err)
	}
	l.mail(&c)
	l.secrets(&c)
	if c.IdentityProviders, err = domain.ParseEnvProviders(getenv("RENGA_IDENTITY_PROVIDERS")); err != nil {
		l.bad("RENGA_IDENTITY_PROVIDERS", "%v", err)
	}
	l.duration("RENGA_PURGE_INTERVAL", &c.PurgeInterval, time.Second)
	l.duration("RENGA_REQUEST_TIMEOUT", &c.RequestTimeout, time.Second)
	l.integer("RENGA_MAX_IN_FLIGHT", &c.MaxInFlight)
	l.duration("RENGA_LOG_FLUSH_INTERVAL", &c.LogFlushInterval, 0)
	if c.LogFlushInterval > MaxLogFlushInterval {
		l.bad("RENGA_LOG_FLUSH_INTERVAL", "must be at most %s (0 writes each line at once), got %s", MaxLogFlushInterval, c.LogFlushInterval)
	}
	l.integer("RENGA_INTAKE_STATEMENTS", &c.IntakeStatements)
	if c.IntakePath, err = domain.ParseIntakePath(getenv("RENGA_INTAKE_GROUP_COMMIT")); err != nil {
		l.bad("RENGA_INTAKE_GROUP_COMMIT", "%v", err)
	}
	var maxConns int
	l.integer("RENGA_DATABASE_MAX_CONNS", &maxConns)
	c.DatabaseMaxConns = int32(min(maxConns, 1000))
	return c, errors.Join(l.errs...)
}

// loader reads variables and collects what is wrong with them.
type loader struct {
	getenv func(string) string
	mode   Mode
	errs   []error
}

func (l *loader) bad(name, format string, args ...any) {
	l.errs = append(l.errs, &ConfigError{Variable: name, Problem: fmt.Sprintf(format, args...)})
}

// environment reads RENGA_ENV, RENGA_LISTEN, RENGA_DATA_DIR and RENGA_DATABASE_URL.
func (l *loader) environment(c *Config) {
	if v := l.getenv("RENGA_ENV"); v != "" {
		switch v {
		case EnvProduction, EnvDevelopment:
			c.Environment = v
		default:
			l.bad("RENGA_ENV", "must be %q or %q, not %q", EnvProduction, EnvDevelopment, v)
		}
		if l.mode == ModeDev && v == EnvProduction {
			l.bad("RENGA_ENV", "is production, but --dev runs a development deployment")
		}
	}
	if v := l.getenv("RENGA_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := l.getenv("RENGA_DATA_DIR"); v != "" {
		c.DataDir = v
	}
	c.DatabaseURL = l.getenv("RENGA_DATABASE_URL")
	if c.DatabaseURL == "" && l.mode == ModeServe {
		l.bad("RENGA_DATABASE_URL", "is required (a PostgreSQL URL); `renga serve --dev` starts a private database instead")
	} else if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			l.bad("RENGA_DATABASE_URL", "must be a postgres:// URL")
		}
	}
}

// addresses reads RENGA_PUBLIC_URL, RENGA_DEPLOYMENT_ID and RENGA_TRUSTED_PROXIES.
func (l *loader) addresses(c *Config) {
	c.PublicURL = l.getenv("RENGA_PUBLIC_URL")
	if c.PublicURL == "" {
		if c.Development() {
			host := c.Listen
			if strings.HasPrefix(host, ":") {
				host = "127.0.0.1" + host
			}
			c.PublicURL = "http://" + host
		} else if l.mode == ModeServe {
			l.bad("RENGA_PUBLIC_URL", "is required: the https URL agents and operators reach this deployment at")
		}
	} else if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") ||
		u.RawQuery != "" || u.Fragment != "" {
		l.bad("RENGA_PUBLIC_URL", "must be an absolute http(s) URL without query or fragment, got %q", c.PublicURL)
	} else if u.Scheme != "https" && !c.Development() {
		l.bad("RENGA_PUBLIC_URL", "must be https in production, got %q", c.PublicURL)
	} else {
		c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	}
	if v := l.getenv("RENGA_DEPLOYMENT_ID"); v != "" {
		if !deploymentIDPattern.MatchString(v) {
			l.bad("RENGA_DEPLOYMENT_ID", "must be 1 to 16 lowercase letters, digits or hyphens, got %q", v)
		}
		c.DeploymentID = v
	}
	if v := l.getenv("RENGA_TRUSTED_PROXIES"); v != "" {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p, err := ParsePrefix(s)
			if err != nil {
				l.bad("RENGA_TRUSTED_PROXIES", "%q is not a CIDR or address", s)
				continue
			}
			c.TrustedProxies = append(c.TrustedProxies, p)
		}
	}
}

// tls reads RENGA_TLS_CERT_FILE and RENGA_TLS_KEY_FILE: production serves HTTPS itself or behind
// trusted proxies.
func (l *loader) tls(c *Config) {
	c.TLSCertFile, c.TLSKeyFile = l.getenv("RENGA_TLS_CERT_FILE"), l.getenv("RENGA_TLS_KEY_FILE")
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		l.bad("RENGA_TLS_CERT_FILE", "and RENGA_TLS_KEY_FILE must be set together")
	}
	if c.TLSCertFile != "" && c.TLSKeyFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			l.bad("RENGA_TLS_CERT_FILE", "and RENGA_TLS_KEY_FILE must be a PEM certificate and its key: %v", err)
		}
	}
	if l.mode == ModeServe && !c.Development() && c.TLSCertFile == "" && len(c.TrustedProxies) == 0 {
		l.bad("RENGA_TLS_CERT_FILE", "production needs HTTPS: set RENGA_TLS_CERT_FILE and RENGA_TLS_KEY_FILE, or RENGA_TRUSTED_PROXIES naming the TLS-terminating proxies")
	}
}

// mail reads RENGA_SMTP_URL and RENGA_MAIL_FROM.
func (l *loader) mail(c *Config) {
	if v := l.getenv("RENGA_SMTP_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "smtp" || u.Hostname() == "" || u.Port() == "" {
			l.bad("RENGA_SMTP_URL", "must be smtp://[user:password@]host:port")
		} else {
			c.SMTPURL = u
		}
	} else if l.mode == ModeServe && c.DataDir == "" && !c.Development() {
		l.bad("RENGA_SMTP_URL", "is required to deliver invitation mail (or set RENGA_DATA_DIR to have mail written to files)")
	}
	c.MailFrom = l.getenv("RENGA_MAIL_FROM")
	if c.MailFrom == "" {
		host := "localhost"
		if u, err := url.Parse(c.PublicURL); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
		c.MailFrom = "renga@" + host
	} else if !strings.Contains(c.MailFrom, "@") || strings.ContainsAny(c.MailFrom, "\r\n<>") {
		l.bad("RENGA_MAIL_FROM", "must be an email address")
	}
}

func (l *loader) duration(name string, dst *time.Duration, min time.Duration) {
	v := l.getenv(name)
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		l.bad(name, "must be a duration of at least %s (e.g. 720h), got %q", min, v)
		return
	}
	*dst = d
}

func (l *loader) number(name string, dst *float64) {
	if v := l.getenv(name); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			l.bad(name, "must be a non-negative number, got %q", v)
			return
		}
		*dst = f
	}
}

func (l *loader) integer(name string, dst *int) {
	if v := l.getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			l.bad(name, "must be a positive integer, got %q", v)
			return
		}
		*dst = n
	}
}

// ParsePrefix accepts a CIDR or a bare address (as a single-address prefix).
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// secrets reads RENGA_SECRET_KEY and RENGA_SECRET_KEY_PREVIOUS (comma-separated). `renga serve`
// requires the key; --dev keeps one under RENGA_DATA_DIR (created on first start); a release
// command may run without it, and then cannot write a secret.
func (l *loader) secrets(c *Config) {
	v := l.getenv("RENGA_SECRET_KEY")
	if v == "" && l.mode == ModeDev {
		var err error
		if v, err = devSecretKey(c.DataDir); err != nil {
			l.bad("RENGA_SECRET_KEY", "is not set and the development key could not be kept: %v", err)
			return
		}
	}
	if v == "" {
		if l.mode == ModeServe {
			l.bad("RENGA_SECRET_KEY", "is required: 32 random bytes in standard base64 (head -c 32 /dev/urandom | base64)")
		}
		return
	}
	current, err := secretbox.ParseKey(v)
	if err != nil {
		l.bad("RENGA_SECRET_KEY", "%v", err)
		return
	}
	var previous [][]byte
	if p := l.getenv("RENGA_SECRET_KEY_PREVIOUS"); p != "" {
		for i, s := range strings.Split(p, ",") {
			k, err := secretbox.ParseKey(s)
			if err != nil {
				l.bad("RENGA_SECRET_KEY_PREVIOUS", "key %d %v", i+1, err)
				return
			}
			previous = append(previous, k)
		}
	}
	if c.Secrets, err = secretbox.New(current, previous...); err != nil {
		l.bad("RENGA_SECRET_KEY", "%v", err)
	}
}

// devSecretKey is the development deployment's key, kept in dir/secret_key (mode 0600).
func devSecretKey(dir string) (string, error) {
	path := filepath.Join(dir, "secret_key")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	k := secretbox.NewKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(k + "\n"); err != nil {
		_ = f.Close()
		return "", err
	}
	return k, f.Close()
}

// HTTPTimeouts are how long a connection may take: a client that sends its headers, its body
// or nothing more slowly than this is cut off.
type HTTPTimeouts struct {
	Header time.Duration // the request line and headers
	Read   time.Duration // the whole request, body included
	Write  time.Duration // from the end of the headers to the end of the response
	Idle   time.Duration // a kept-alive connection between requests
}

// DefaultHTTPTimeouts are the timeouts docs/api.md documents ("Connections, and outside the API").
var DefaultHTTPTimeouts = HTTPTimeouts{Header: 10 * time.Second, Read: 60 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second}
