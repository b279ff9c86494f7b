package main

import (
	"os"
	"testing"
)

// TestQuietSDKLogs: with no log variable set, the framework's and protocol layer's logs are
// turned off; any log variable leaves the SDKs' defaults alone.
//
// Fails when: quietSDKLogs sets nothing (the SDKs then write trace logs no one asked for), or
// overrides a level someone set.
func TestQuietSDKLogs(t *testing.T) {
	unset := func() {
		for _, v := range sdkLogVariables {
			t.Setenv(v, "") // restored after the test
			if err := os.Unsetenv(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	unset()
	quietSDKLogs()
	for _, v := range []string{"TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"} {
		if got := os.Getenv(v); got != "OFF" {
			t.Errorf("no log asked for: %s=%q, want OFF", v, got)
		}
	}
	for _, asked := range sdkLogVariables {
		unset()
		t.Setenv(asked, "DEBUG")
		quietSDKLogs()
		for _, v := range []string{"TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"} {
			if got := os.Getenv(v); v != asked && got != "" {
				t.Errorf("%s=DEBUG: %s=%q, want it left unset", asked, v, got)
			}
		}
	}
}
