package domain

// For the external tests: the rows read by hand, and how.
var (
	ReadOrganization = readOrganization
	ReadTokenForAuth = readTokenForAuth
)

const (
	OrgColumns   = orgColumns
	TokenForAuth = tokenForAuth
)
