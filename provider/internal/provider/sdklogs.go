package provider

import "os"

// sdkLogVariables are terraform-plugin-log's documented variables that ask for the plugin
// SDKs' logs (its levels for Terraform, the provider, and the framework's and protocol's own
// subsystems).
var sdkLogVariables = []string{"TF_LOG", "TF_LOG_PROVIDER", "TF_LOG_SDK", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"}

// QuietSDKLogs is what a provider binary's main does before serving: when none of
// terraform-plugin-log's variables is set, it sets TF_LOG_SDK_FRAMEWORK and TF_LOG_SDK_PROTO
// to OFF, terraform-plugin-log's documented way to turn those subsystems off. Without it the
// framework writes its trace lines (several per attribute of every call) to the pipe Terraform
// reads, and Terraform decodes each only to drop it, since no log was asked for. Setting any of
// the variables (TF_LOG=DEBUG, TF_LOG_PROVIDER=TRACE, TF_LOG_SDK_FRAMEWORK=TRACE, ...) keeps
// the SDKs' own defaults.
func QuietSDKLogs() {
	quietSDKLogs(os.LookupEnv, os.Setenv)
}

func quietSDKLogs(lookup func(string) (string, bool), set func(string, string) error) {
	for _, v := range sdkLogVariables {
		if _, ok := lookup(v); ok {
			return
		}
	}
	for _, v := range []string{"TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"} {
		_ = set(v, "OFF")
	}
}
