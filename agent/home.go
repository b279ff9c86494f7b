package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"renga.dev/renga/gen/client"
)

// Home is home.json: the deployment this agent sends every request to, resolved from
// renga_url. Deleting the file forces resolution at the next start.
type Home struct {
	RengaURL   string    `json:"renga_url"`
	Home       string    `json:"home"`
	ResolvedAt time.Time `json:"resolved_at"`
}

// LoadHome reads home.json; fs.ErrNotExist when no home is persisted.
func LoadHome(stateDir string) (Home, error) {
	var h Home
	b, err := os.ReadFile(filepath.Join(stateDir, homeName))
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s: %w", homeName, err)
	}
	return h, nil
}

func saveHome(stateDir string, h Home) error { return writeJSONFile(stateDir, homeName, h, false) }

func discardHome(stateDir string) error {
	err := os.Remove(filepath.Join(stateDir, homeName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ResolveError is a resolution that gave no usable home.
type ResolveError struct {
	RengaURL string
	Err      error
}

func (e *ResolveError) Error() string {
	return fmt.Sprintf("resolve the home from %s: %v", e.RengaURL, e.Err)
}

func (e *ResolveError) Unwrap() error { return e.Err }

// resolveHome sends the home request to renga_url with the deployment identifier read from the
// intake key (an empty parameter when the key has none) and checks the answer: a 200 whose home
// is an https URL (http only with allow_insecure_http). The request carries no credential.
func resolveHome(ctx context.Context, hc *http.Client, cfg Config) (string, error) {
	fail := func(err error) (string, error) { return "", &ResolveError{RengaURL: cfg.RengaURL, Err: err} }
	base, err := baseURL(cfg.RengaURL, cfg.AllowInsecureHTTP)
	if err != nil {
		return fail(err)
	}
	ident, err := DeploymentIdentifier(cfg.IntakeKey)
	if err != nil {
		return fail(err)
	}
	c, err := client.NewClientWithResponses(base, client.WithHTTPClient(hc))
	if err != nil {
		return fail(err)
	}
	r, err := c.GetHomeWithResponse(ctx, &client.GetHomeParams{Deployment: &ident})
	if err != nil {
		return fail(err)
	}
	if r.StatusCode() != http.StatusOK {
		he := homeError(base, r.HTTPResponse, r.Body)
		if he.Status == http.StatusNotFound {
			return fail(fmt.Errorf("no home is known for deployment identifier %q (404); will ask again later", ident))
		}
		return fail(he)
	}
	var answer client.Home
	if err := json.Unmarshal(r.Body, &answer); err != nil || answer.Home == "" {
		return fail(fmt.Errorf("the answer is not {\"home\": URL}"))
	}
	home, err := baseURL(answer.Home, cfg.AllowInsecureHTTP)
	if err != nil {
		return fail(fmt.Errorf("refused the home it answered: %w", err))
	}
	return home, nil
}
