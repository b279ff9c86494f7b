package shortpath

import "github.com/hashicorp/terraform-plugin-go/tfprotov6"

// Answered is how many calls s answered without the framework (0 when Wrap returned the
// framework's server as it was).
func Answered(s tfprotov6.ProviderServer) int64 {
	if w, ok := s.(*server); ok {
		return w.answered.Load()
	}
	return 0
}
