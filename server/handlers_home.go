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
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(a)
	return err
}
