package pipeline

import (
	"net/http"
	"strconv"
	"strings"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

// parseIfMatch returns the version a strong tag names; a weak or malformed tag gets -1, which no
// stored version equals, so the write fails with 412 and the current version. A missing tag, or
// "*", is 428: automation must name the version it read.
func parseIfMatch(r *http.Request) (int64, *problem.Error) {
	present := r.Header.Values("If-Match") != nil
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if !present || v == "" || v == "*" {
		return 0, problem.New(http.StatusPreconditionRequired, api.ErrorCodePreconditionRequired,
			`Send If-Match with the version you last read, e.g. If-Match: "3" (the ETag of a GET); "*" is not accepted.`)
	}
	// Strong comparison is byte for byte: only the spelling the ETag uses ("3", not "03" or
	// "+3") names a version.
	if len(v) >= 3 && v[0] == '"' && v[len(v)-1] == '"' {
		tag := v[1 : len(v)-1]
		if n, err := strconv.ParseInt(tag, 10, 64); err == nil && n > 0 && strconv.FormatInt(n, 10) == tag {
			return n, nil
		}
	}
	return -1, nil
}
