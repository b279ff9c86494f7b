package domain

// For the external tests: the statements that read the rows read on nearly every request.
const (
	OrgColumns   = orgColumns
	TokenForAuth = tokenForAuth
)
