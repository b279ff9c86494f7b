// Package agent is the program that runs on an organization's hosts (`renga agent run`): it
// keeps an installation identity, resolves its home deployment as RFD 23 says, collects host
// facts into a durable queue and sends them in signed batches, and runs the jobs its home
// queues for it.
package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is agent.yaml; every setting can also come from the environment (RENGA_AGENT_ and the
// setting's name in upper case), which wins over the file.
type Config struct {
	RengaURL          string
	IntakeKey         string
	IntakeKeyFile     string
	StateDir          string
	AllowInsecureHTTP bool
	Interval          time.Duration
	QueueMaxBytes     int64
}

// Defaults of the settings that have one.
const (
	DefaultStateDir      = "/var/lib/renga-agent"
	DefaultInterval      = time.Minute
	DefaultQueueMaxBytes = 64 << 20
	// MinQueueMaxBytes holds at least a few full batches.
	MinQueueMaxBytes = 4 << 20
	// MinInterval keeps a misconfigured agent from collecting in a hot loop.
	MinInterval = 100 * time.Millisecond
)

// ConfigError names the setting that is wrong.
type ConfigError struct {
	Setting string
	Problem string
}

func (e *ConfigError) Error() string { return e.Setting + ": " + e.Problem }

// fileConfig is the YAML as written. Every value is read as its text and parsed below, as the
// environment's are, so that a bad value is refused by its setting's name.
type fileConfig struct {
	RengaURL          string `yaml:"renga_url"`
	IntakeKey         string `yaml:"intake_key"`
	IntakeKeyFile     string `yaml:"intake_key_file"`
	StateDir          string `yaml:"state_dir"`
	AllowInsecureHTTP string `yaml:"allow_insecure_http"`
	Interval          string `yaml:"interval"`
	QueueMaxBytes     string `yaml:"queue_max_bytes"`
}

// LoadConfig reads path (none when empty), then the environment through getenv, validates the
// result and reads the intake key file. An unknown setting in the file is refused.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	var fc fileConfig
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read the configuration: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	for name, dst := range map[string]*string{"renga_url": &fc.RengaURL, "intake_key": &fc.IntakeKey,
		"intake_key_file": &fc.IntakeKeyFile, "state_dir": &fc.StateDir, "allow_insecure_http": &fc.AllowInsecureHTTP,
		"interval": &fc.Interval, "queue_max_bytes": &fc.QueueMaxBytes} {
		if v := getenv("RENGA_AGENT_" + strings.ToUpper(name)); v != "" {
			*dst = v
		}
	}
	c := Config{RengaURL: fc.RengaURL, IntakeKey: fc.IntakeKey, IntakeKeyFile: fc.IntakeKeyFile, StateDir: fc.StateDir,
		Interval: DefaultInterval, QueueMaxBytes: DefaultQueueMaxBytes}
	if fc.AllowInsecureHTTP != "" {
		b, err := strconv.ParseBool(fc.AllowInsecureHTTP)
		if err != nil {
			return Config{}, &ConfigError{"allow_insecure_http", "must be true or false"}
		}
		c.AllowInsecureHTTP = b
	}
	if fc.QueueMaxBytes != "" {
		n, err := strconv.ParseInt(fc.QueueMaxBytes, 10, 64)
		if err != nil {
			return Config{}, &ConfigError{"queue_max_bytes", "must be a number of bytes"}
		}
		c.QueueMaxBytes = n
	}
	if fc.Interval != "" {
		d, err := time.ParseDuration(fc.Interval)
		if err != nil {
			return Config{}, &ConfigError{"interval", "must be a Go duration such as 30s"}
		}
		c.Interval = d
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if err := c.readIntakeKeyFile(); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

func (c *Config) readIntakeKeyFile() error {
	if c.IntakeKeyFile == "" {
		return nil
	}
	if c.IntakeKey != "" {
		return &ConfigError{"intake_key_file", "set intake_key or intake_key_file, not both"}
	}
	b, err := os.ReadFile(c.IntakeKeyFile)
	if err != nil {
		return &ConfigError{"intake_key_file", err.Error()}
	}
	c.IntakeKey = strings.TrimSpace(string(b))
	return nil
}

// Validate checks every setting and names the first one that is wrong.
func (c Config) Validate() error {
	if c.RengaURL == "" {
		return &ConfigError{"renga_url", "required: the deployment or resolver this agent resolves its home from"}
	}
	if _, err := baseURL(c.RengaURL, c.AllowInsecureHTTP); err != nil {
		return &ConfigError{"renga_url", err.Error()}
	}
	if c.IntakeKey == "" {
		return &ConfigError{"intake_key", "required (or intake_key_file)"}
	}
	if _, err := DeploymentIdentifier(c.IntakeKey); err != nil {
		return &ConfigError{"intake_key", err.Error()}
	}
	if c.Interval < MinInterval {
		return &ConfigError{"interval", fmt.Sprintf("must be at least %s", MinInterval)}
	}
	if c.QueueMaxBytes < MinQueueMaxBytes {
		return &ConfigError{"queue_max_bytes", fmt.Sprintf("must be at least %d", MinQueueMaxBytes)}
	}
	return nil
}

// baseURL checks a deployment's or resolver's URL: absolute, https (http only when allowed),
// a host, no credentials, query or fragment. It returns it without a trailing slash.
func baseURL(raw string, allowInsecureHTTP bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowInsecureHTTP:
	case u.Scheme == "http":
		return "", fmt.Errorf("%q is http: it must be https unless allow_insecure_http is set", raw)
	default:
		return "", fmt.Errorf("%q must be an https URL", raw)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%q must be a plain URL (scheme, host and optional path)", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// IntakeKeyPrefix starts every intake key: renga_intake_[<deployment identifier>_]<secret>.
const IntakeKeyPrefix = "renga_intake_"

// DeploymentIdentifier is the identifier an intake key carries in the open between its prefix
// and its secret, or "" when it has none (RFD 23).
func DeploymentIdentifier(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, IntakeKeyPrefix)
	if !ok || rest == "" {
		return "", errors.New("not an intake key (renga_intake_...)")
	}
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return "", nil
	}
	id := rest[:i]
	if len(id) < 1 || len(id) > 16 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return "", errors.New("its deployment identifier is not 1 to 16 of a-z, 0-9 and -")
	}
	if i == len(rest)-1 {
		return "", errors.New("it has no secret after the deployment identifier")
	}
	return id, nil
}
