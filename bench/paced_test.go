package bench

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// BenchmarkGetOrganizationPaced is BenchmarkGetOrganization at a client's pace rather than flat
// out: each client waits pace after each answer, as Terraform's refresh does between reads
// (-parallelism=10). It reports the CPU per request of this process (server and client) and of
// PostgreSQL's backends: on a machine that idles between requests, each request costs more CPU
// than under load (every request wakes the server, the client and a backend), which is what the
// API costs a refresh-only plan (bench/terraform_load_test.go prints the plan's share).
func BenchmarkGetOrganizationPaced(b *testing.B) {
	env := servertest.Start(b)
	token := env.Token(b, "organizations:write")
	c := httpClient()
	ids := createOrganizationPaths(b, c, env.URL, token, 100)
	for _, pace := range []time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond} {
		for _, clients := range []int{1, 10} {
			b.Run(fmt.Sprintf("pace=%v/clients=%d", pace, clients), func(b *testing.B) {
				cpu := startCPU(b, env.Pool)
				b.ResetTimer()
				var wg sync.WaitGroup
				per := b.N/clients + 1
				for k := range clients {
					wg.Go(func() {
						for i := range per {
							req, _ := http.NewRequest(http.MethodGet, env.URL+ids[(k*per+i)%len(ids)], nil)
							req.Header.Set("Authorization", "Bearer "+token)
							do(b, c, req, http.StatusOK)
							if pace > 0 {
								time.Sleep(pace)
							}
						}
					})
				}
				wg.Wait()
				cpu.report(b, per*clients)
			})
		}
	}
}
