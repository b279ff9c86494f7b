package shortpath

import "github.com/hashicorp/terraform-plugin-go/tfprotov6"

// Answered is how many calls s answered without the framework (0 when Wrap returned the
// framework's server as it was).
func Answered(s tfprotov6.ProviderServer) int64 {
	var n int64
	for _, call := range []string{callUpgrade, callRead, callPlan, callApply, callValidate} {
		n += AnsweredCalls(s, call)
	}
	return n
}

// AnsweredCalls is how many of the calls named call (PlanResourceChange, ...) s answered
// without the framework.
func AnsweredCalls(s tfprotov6.ProviderServer, call string) int64 {
	if w, ok := s.(*server); ok && w.answered[call] != nil {
		return w.answered[call].Load()
	}
	return 0
}
