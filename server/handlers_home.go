package server

import (
	"context"
	"encoding/json"
	"net/http"

	"renga.dev/renga/gen/api"
)

// GetHome answers the deployment's own public URL, whatever was asked: a deployment is its own
// home, and nothing of the request shapes the answer.
func (s *Server) GetHome(context.Context, api.GetHomeRequestObject) (api.GetHomeResponseObject, error) {
	return s.home, nil
}

// homeAnswer is GetHome's answer encoded once, when the server is built: the document never
// changes while the server runs, and agents ask for it more than for anything else but intake.
// It writes what api.GetHome200JSONResponse writes for the same document, byte for byte
// (TestHomeAnswerIsTheGeneratedOne), without encoding the document on every request.
type homeAnswer []byte

func newHomeAnswer(publicURL string) (homeAnswer, error) {
	b, err := json.Marshal(api.Home{Home: publicURL})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil // json.Encoder's line, as the generated response writes it
}

// VisitGetHomeResponse implements api.GetHomeResponseObject.
func (a homeAnswer) VisitGetHomeResponse(w http.ResponseWriter) error {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(a)
	return err
}

// jsonContentType is the Content-Type header's value, shared by every home answer: a slice of
// capacity one, so that an Add to the header copies it rather than writes into it.
var jsonContentType = []string{"application/json"}

// ServeHTTP answers the home request in place of the generated handler (pipeline.Options.Direct),
// after the pipeline's stages: the generated one would bind the query's deployment parameter,
// which the answer never reads, from a query the pipeline has validated against the spec
// (FuzzHomeDirectAnswerIsTheGenerated holds the two to the same answers).
func (a homeAnswer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	_ = a.VisitGetHomeResponse(w) // a failed write is the connection's, as the generated handler's
}
