// Package process sets up a provider process as the Renga provider's binary sets itself up:
// the plugin SDKs' logs quiet unless asked for, and one processor.
package process

import (
	"os"
	"runtime"
)

// SetUp is what the provider's main does first: QuietSDKLogs and OneProcessor.
func SetUp() {
	QuietSDKLogs()
	OneProcessor()
}

// OneProcessor runs the provider's Go code on one processor (GOMAXPROCS=1) unless the
// GOMAXPROCS variable says otherwise. The provider answers Terraform's calls, each a few hundred
// microseconds of CPU around a wait on the API; with a processor per core, the Go scheduler
// spends CPU waking idle processors and spinning for work at every call and response. On
// examples/scale (refresh-only plan and apply, Terraform and the provider on two shared cores,
// the provider's CPU measured around its binary in interleaved runs) the provider used about
// 10 % less CPU with one processor, for the same wall time. One processor serves over a thousand
// such calls a second, more than Terraform's walk asks for.
func OneProcessor() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}

// SDKLogVariables turn on the plugin SDKs' logs (terraform-plugin-log's levels).
var SDKLogVariables = []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"}

// QuietSDKLogs turns the framework's and the protocol layer's logs off when no log was asked
// for. Without any TF_LOG variable, terraform-plugin-framework still writes its trace logs (a
// dozen JSON lines per attribute of every request) to the pipe Terraform reads, and Terraform
// parses each line only to drop it: measured with bench/ (TestTerraformScale), that was about
// a third of the provider's CPU and much of Terraform's own extra CPU over its floor. Setting
// any of these variables (TF_LOG=DEBUG, TF_LOG_PROVIDER=TRACE to debug the provider,
// TF_LOG_SDK_FRAMEWORK=TRACE, ...) keeps the SDKs' defaults.
func QuietSDKLogs() {
	for _, v := range SDKLogVariables {
		if _, set := os.LookupEnv(v); set {
			return
		}
	}
	for _, v := range []string{"TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"} {
		_ = os.Setenv(v, "OFF")
	}
}
