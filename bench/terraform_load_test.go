package bench

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// TestTerraformScale is the Terraform comparison: `terraform apply` of examples/scale (200
// organizations and 200 policies, -parallelism=10) against a fresh server, then a refresh-only
// plan, each beside the same graph of 400 terraform_data resources (Terraform's own floor: no
// provider, no API), in interleaved pairs (RENGA_TF_PAIRS, 3 by default). Each pair also plans
// the same state with a provider that does no I/O (provider/internal/noioprovider): what is left
// of the plan's ratio once the API and the provider's client cost nothing. Last, plans with no
// resources, with the provider and with the floor's: their difference is what starting the
// provider costs (Terraform starts it three times in a plan: for its schema, to validate, to
// plan), the least any provider could add to the floor's plan; and each start apart from
// Terraform (exec to the plugin handshake), beside a framework provider with nothing in it, which
// is also started without Terraform's client certificate (what automatic mTLS costs). Run with
// RENGA_TF_BENCH=1 and terraform on PATH (bench/run.sh does).
func TestTerraformScale(t *testing.T) {
	if os.Getenv("RENGA_TF_BENCH") == "" {
		t.Skip("load script: set RENGA_TF_BENCH=1")
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("no terraform on PATH")
	}
	env := servertest.Start(t)
	token := env.Token(t, "organizations:write", "policies:write")

	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-renga"), "renga.dev/renga/provider").CombinedOutput(); err != nil {
		t.Fatalf("build the provider: %v\n%s", err, out)
	}
	rc := cliConfig(t, bin)
	// The provider with no I/O (provider/internal/noioprovider): the real resources and server,
	// Read keeping the state, no call to the deployment. Its refresh-only plan of the same state
	// is the least a provider could cost Terraform.
	noIOBin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(noIOBin, "terraform-provider-renga"), "renga.dev/renga/provider/internal/noioprovider").CombinedOutput(); err != nil {
		t.Fatalf("build the provider with no I/O: %v\n%s", err, out)
	}
	noIORC := cliConfig(t, noIOBin)

	scale, err := os.ReadFile("../examples/scale/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	const floorConfig = `resource "terraform_data" "org" {
  count = 200
  input = { slug = format("scale-%03d", count.index), display_name = format("Scale test %03d", count.index) }
}

resource "terraform_data" "policy" {
  count = 200
  input = { organization_id = terraform_data.org[count.index].id, max_agents = 100 + count.index, max_users = 10, jobs = count.index % 2 == 0 }
}
`
	// Each run's wall time, and the CPU it cost: Terraform with the provider (the process's
	// rusage, which counts the provider processes it reaped), this process (the server) and
	// the server's PostgreSQL backends. On two cores a run whose CPU is far below twice its
	// wall time waited (on Terraform's walk, round trips), rather than computed.
	var cpuLines []string
	apiCPU := map[string]time.Duration{} // each run's server and PostgreSQL CPU, by name
	runWith := func(rc, name, dir string, args ...string) time.Duration {
		cmd := exec.Command(tf, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
			"RENGA_URL="+env.URL, "RENGA_OPERATOR_TOKEN="+token)
		pg0, err := backendCPU(env.Pool)
		if err != nil {
			t.Fatal(err)
		}
		self0 := selfCPU()
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("terraform %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		wall := time.Since(start)
		pg1, err := backendCPU(env.Pool)
		if err != nil {
			t.Fatal(err)
		}
		var pg time.Duration
		for pid, c := range pg1 {
			pg += c - pg0[pid]
		}
		tfCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		apiCPU[name] = selfCPU() - self0 + pg
		cpuLines = append(cpuLines, fmt.Sprintf("terraform-scale cpu %-17s wall=%.2fs terraform+provider=%.2fs server=%.2fs postgres=%.2fs",
			name, wall.Seconds(), tfCPU.Seconds(), (selfCPU()-self0).Seconds(), pg.Seconds()))
		return wall
	}
	run := func(name, dir string, args ...string) time.Duration { return runWith(rc, name, dir, args...) }
	apply := []string{"apply", "-auto-approve", "-parallelism=10", "-no-color", "-input=false"}
	plan := []string{"plan", "-refresh-only", "-no-color", "-input=false"}
	// Interleaved pairs, each in new directories with new organizations (a prefix of their
	// own): one apply against its floor moves by a quarter from one run to the next on these
	// shared cores; the median of the pairs is the run's figure, and every pair is printed.
	pairs := 3
	if n, err := strconv.Atoi(os.Getenv("RENGA_TF_PAIRS")); err == nil && n > 0 {
		pairs = n
	}
	var loopRatios, floorLoopRatios []float64
	var applyRatios, planRatios, noIORatios, floorPlans, noIOPlans, apiPlans, apiCPUs, overNoIO []float64
	for i := range pairs {
		renga, floor := t.TempDir(), t.TempDir()
		write(t, filepath.Join(renga, "main.tf"), string(scale))
		write(t, filepath.Join(floor, "main.tf"), floorConfig)
		prefix := []string{"-var", fmt.Sprintf("prefix=scale%d", i)}
		floorApply := run(fmt.Sprint("floor-apply-", i+1), floor, apply...)
		rengaApply := run(fmt.Sprint("renga-apply-", i+1), renga, append(apply, prefix...)...)
		loop := goLoopApply(t, env.URL, token, fmt.Sprintf("loop%d", i))
		loopRatios = append(loopRatios, rengaApply.Seconds()/loop.Seconds())
		floorLoopRatios = append(floorLoopRatios, floorApply.Seconds()/loop.Seconds())
		floorPlan := run(fmt.Sprint("floor-plan-", i+1), floor, plan...)
		rengaPlan := run(fmt.Sprint("renga-plan-", i+1), renga, append(plan, prefix...)...)
		noIOPlan := runWith(noIORC, fmt.Sprint("noio-plan-", i+1), renga, append(plan, prefix...)...)
		applyRatios = append(applyRatios, rengaApply.Seconds()/floorApply.Seconds())
		planRatios = append(planRatios, rengaPlan.Seconds()/floorPlan.Seconds())
		noIORatios = append(noIORatios, noIOPlan.Seconds()/floorPlan.Seconds())
		floorPlans = append(floorPlans, floorPlan.Seconds())
		noIOPlans = append(noIOPlans, noIOPlan.Seconds())
		apiPlans = append(apiPlans, rengaPlan.Seconds()-noIOPlan.Seconds())
		overNoIO = append(overNoIO, rengaPlan.Seconds()/noIOPlan.Seconds())
		apiCPUs = append(apiCPUs, (apiCPU[fmt.Sprint("renga-plan-", i+1)] - apiCPU[fmt.Sprint("noio-plan-", i+1)]).Seconds())
		fmt.Printf("terraform-scale pair %d: apply renga=%.2fs floor=%.2fs ratio=%.2f  plan renga=%.2fs floor=%.2fs ratio=%.2f  no-I/O provider=%.2fs ratio=%.2f\n", i+1,
			rengaApply.Seconds(), floorApply.Seconds(), rengaApply.Seconds()/floorApply.Seconds(),
			rengaPlan.Seconds(), floorPlan.Seconds(), rengaPlan.Seconds()/floorPlan.Seconds(),
			noIOPlan.Seconds(), noIOPlan.Seconds()/floorPlan.Seconds())
	}
	// The provider's fixed cost: the same configuration with no resources (Terraform starts
	// and configures the provider, reads nothing), beside the floor's with no resources (no
	// provider to start). Their difference is what starting the provider costs a plan whatever
	// it manages; Terraform's own log, in a run of its own (logging slows it), says how many
	// times it started the provider in one plan.
	empty, floorEmpty := t.TempDir(), t.TempDir()
	write(t, filepath.Join(empty, "main.tf"), string(scale))
	noFloorResources := strings.ReplaceAll(floorConfig, "count = 200", "count = 0")
	if strings.Count(noFloorResources, "count = 0") != 2 {
		t.Fatal("the floor's configuration no longer has two blocks of count = 200 to empty")
	}
	write(t, filepath.Join(floorEmpty, "main.tf"), noFloorResources)
	emptyPlan := run("empty-plan", empty, append(plan, "-var", "count_of_organizations=0")...)
	floorEmptyPlan := run("floor-empty-plan", floorEmpty, plan...)
	tfLog := filepath.Join(t.TempDir(), "terraform.log")
	t.Setenv("TF_LOG", "debug")
	t.Setenv("TF_LOG_PATH", tfLog)
	run("empty-plan-logged", empty, append(plan, "-var", "count_of_organizations=0")...)
	logged, err := os.ReadFile(tfLog)
	if err != nil {
		t.Fatal(err)
	}
	starts := strings.Count(string(logged), "provider: starting plugin:")
	if starts == 0 {
		t.Fatal("Terraform's log names no start of the provider: its wording changed")
	}
	// What a start costs apart from Terraform: the provider's binary from exec to its plugin
	// handshake, beside a framework provider with nothing in it
	// (provider/internal/emptyprovider), the least any framework provider's start could be.
	emptyBin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(emptyBin, "terraform-provider-renga"), "renga.dev/renga/provider/internal/emptyprovider").CombinedOutput(); err != nil {
		t.Fatalf("build the empty provider: %v\n%s", err, out)
	}
	emptyPath := filepath.Join(emptyBin, "terraform-provider-renga")
	startCosts := providerStarts(t, 20, []providerStart{{filepath.Join(bin, "terraform-provider-renga"), true},
		{emptyPath, true}, {emptyPath, false}})
	rengaStart, emptyStart, emptyNoTLS := startCosts[0], startCosts[1], startCosts[2]
	fmt.Printf("terraform-scale apply ratio=%.2f  plan ratio=%.2f  (medians of %d interleaved pairs)  no-I/O provider plan ratio=%.2f\n",
		median(applyRatios), median(planRatios), pairs, median(noIORatios))
	// The baselines' own comparison for apply (../shared/baselines/README.md: at most 1.5 times
	// the same API calls from a Go loop with 10 workers), beside the floor's apply against the
	// same loop: what Terraform's walk costs with no provider at all.
	fmt.Printf("terraform-scale apply vs the same API calls from a Go loop with 10 workers=%.2f (the floor's apply vs the loop=%.2f; medians of %d)  (the baselines' target: <= 1.5)\n",
		median(loopRatios), median(floorLoopRatios), pairs)
	startCost := emptyPlan.Seconds() - floorEmptyPlan.Seconds()
	fmt.Printf("terraform-scale plan with no resources: renga=%.2fs floor=%.2fs  (Terraform started the provider %d times in one plan)  least plan ratio of any provider=%.2f (the floor's plan and the provider's starts)\n",
		emptyPlan.Seconds(), floorEmptyPlan.Seconds(), starts, (median(floorPlans)+startCost)/median(floorPlans))
	// The least any framework provider could add: the starts' cost less what the Renga
	// provider's binary takes longer to start than one with nothing in it, at each start.
	anyStartCost := startCost - float64(starts)*(rengaStart.wall-emptyStart.wall)/1000
	fmt.Printf("terraform-scale provider start to handshake (medians of 20, alternating): renga %.1f ms wall, %.1f ms CPU; a framework provider with nothing in it %.1f ms wall, %.1f ms CPU  least plan ratio of any framework provider=%.2f\n",
		rengaStart.wall, rengaStart.cpu, emptyStart.wall, emptyStart.cpu, (median(floorPlans)+anyStartCost)/median(floorPlans))
	// Where renga's plan goes, beyond the floor's (medians): the provider's starts; the rest of
	// the provider with no I/O (its gRPC calls and state handling, per resource); what the API adds
	// (the provider's client, the server, PostgreSQL: the renga plan less the no-I/O one in the
	// same pair), with the server's and PostgreSQL's CPU for it. The plan's target is out of any
	// provider's reach when the floor and the starts alone pass it.
	floorMedian := median(floorPlans)
	const planReads = 400 // 200 organizations and 200 policies, a GET each
	fmt.Printf("terraform-scale plan's time beyond the floor's %.2fs: provider starts %.2fs (%.2f of the floor), the no-I/O provider's reads %.2fs, the API %.2fs (server and PostgreSQL CPU %.2fs, %.0f µs per read)  renga plan vs the no-I/O provider's=%.2f\n",
		floorMedian, startCost, startCost/floorMedian, median(noIOPlans)-floorMedian-startCost, median(apiPlans),
		median(apiCPUs), median(apiCPUs)/planReads*1e6, median(overNoIO))
	// Of a start, what go-plugin's automatic mutual TLS costs: with Terraform's client
	// certificate in its environment, a plugin makes a P-521 key and a certificate of its own
	// before its handshake, at every start. Without one (no TLS) the same empty provider shows it.
	fmt.Printf("terraform-scale of the empty provider's start, Terraform's automatic mTLS (go-plugin makes a P-521 key and certificate at each start): %.1f ms wall, %.1f ms CPU (%.1f ms wall without a client certificate)\n",
		emptyStart.wall-emptyNoTLS.wall, emptyStart.cpu-emptyNoTLS.cpu, emptyNoTLS.wall)
	fmt.Println(strings.Join(cpuLines, "\n"))
}

// startCost is the median time from a provider binary's exec to its plugin handshake line, and
// the median CPU its process used by then, in milliseconds.
type startCost struct{ wall, cpu float64 }

// providerStart is a binary to start, with Terraform's client certificate in its environment
// (tls) or without.
type providerStart struct {
	bin string
	tls bool
}

// providerStarts starts each binary n times, alternating, as Terraform starts a provider: the
// plugin protocol's environment, with a client certificate where tls is set (Terraform's
// automatic mutual TLS, so the provider makes its own certificate as it does under Terraform);
// it reads the handshake line, then kills the process. The costs are in starts' order.
func providerStarts(t *testing.T, n int, starts []providerStart) []startCost {
	t.Helper()
	clientCert := selfSignedCertPEM(t)
	socketDir := t.TempDir() // the plugins' sockets, which a killed plugin leaves behind
	walls, cpus := make([][]float64, len(starts)), make([][]float64, len(starts))
	for range n {
		for i, s := range starts {
			cmd := exec.Command(s.bin)
			cmd.Env = append(os.Environ(), "TMPDIR="+socketDir,
				// terraform-plugin-go's handshake (tf6server): the cookie Terraform sets.
				"TF_PLUGIN_MAGIC_COOKIE=d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
				"PLUGIN_PROTOCOL_VERSIONS=6")
			if s.tls {
				cmd.Env = append(cmd.Env, "PLUGIN_CLIENT_CERT="+clientCert)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			wall := time.Since(start)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if err != nil || !strings.HasPrefix(line, "1|6|") {
				t.Fatalf("%s: no plugin handshake (%q): %v", s.bin, line, err)
			}
			walls[i] = append(walls[i], ms(wall))
			cpus[i] = append(cpus[i], ms(cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime()))
		}
	}
	costs := make([]startCost, len(starts))
	for i := range starts {
		costs[i] = startCost{median(walls[i]), median(cpus[i])}
	}
	return costs
}

// selfSignedCertPEM is a client certificate as go-plugin makes one for Terraform (ECDSA P-521).
func selfSignedCertPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cliConfig writes a Terraform CLI configuration whose dev_overrides take renga/renga from dir.
func cliConfig(t *testing.T, dir string) string {
	rc := filepath.Join(t.TempDir(), "terraformrc")
	write(t, rc, fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"renga/renga\" = %q\n  }\n  direct {}\n}\n", dir))
	return rc
}

// median is the middle of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// goLoopApply sends the API calls the provider sends in an apply of examples/scale: for each of
// 200 organizations a keyed create, then its policy's first write (If-Match "1", keyed), from a
// Go loop with 10 workers, and returns the time it took. Slugs start with prefix.
func goLoopApply(t *testing.T, url, token, prefix string) time.Duration {
	t.Helper()
	c := httpClient()
	send := func(method, path, body string, header map[string]string, want int) (string, error) {
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			return "", fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, answer)
		}
		return resp.Header.Get("Location"), nil
	}
	var next atomic.Int64
	errs := make(chan error, 10)
	var wg sync.WaitGroup
	start := time.Now()
	for range 10 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < 200; i = int(next.Add(1)) - 1 {
				org, err := send(http.MethodPost, "/api/v1/operator/organizations",
					fmt.Sprintf(`{"slug":"%s-%03d","display_name":"Scale test %03d"}`, prefix, i, i),
					map[string]string{"Idempotency-Key": fmt.Sprintf("%s-org-%d", prefix, i)}, http.StatusCreated)
				if err == nil {
					_, err = send(http.MethodPut, org+"/policy",
						fmt.Sprintf(`{"limits":{"max_agents":%d,"max_users":10},"entitlements":{"jobs":%t}}`, 100+i, i%2 == 0),
						map[string]string{"If-Match": `"1"`, "Idempotency-Key": fmt.Sprintf("%s-policy-%d", prefix, i)}, http.StatusOK)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return took
}
