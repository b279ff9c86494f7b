package process

import (
	"os"
	"runtime"
	"testing"
)

// TestQuietSDKLogs: with no log variable set, the framework's and protocol layer's logs are
// turned off; any log variable leaves the SDKs' defaults alone.
//
// Fails when: QuietSDKLogs sets nothing (the SDKs then write trace logs no one asked for), or
// overrides a level someone set.
func TestQuietSDKLogs(t *testing.T) {
	unset := func() {
		for _, v := range SDKLogVariables {
			t.Setenv(v, "") // restored after the test
			if err := os.Unsetenv(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	unset()
	QuietSDKLogs()
	for _, v := range []string{"TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"} {
		if got := os.Getenv(v); got != "OFF" {
			t.Errorf("no log asked for: %s=%q, want OFF", v, got)
		}
	}
	for _, asked := range SDKLogVariables {
		unset()
		t.Setenv(asked, "DEBUG")
		QuietSDKLogs()
		for _, v := range []string{"TF_LOG_SDK_FRAMEWORK", "TF_LOG_SDK_PROTO"} {
			if got := os.Getenv(v); v != asked && got != "" {
				t.Errorf("%s=DEBUG: %s=%q, want it left unset", asked, v, got)
			}
		}
	}
}

// TestOneProcessor: without GOMAXPROCS the provider runs on one processor; GOMAXPROCS keeps its
// say.
//
// Fails when: OneProcessor leaves the default (a processor per core), or overrides GOMAXPROCS.
func TestOneProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "") // restored after the test
	if err := os.Unsetenv("GOMAXPROCS"); err != nil {
		t.Fatal(err)
	}
	runtime.GOMAXPROCS(3)
	OneProcessor()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS unset: %d processors, want 1", n)
	}
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	OneProcessor()
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("GOMAXPROCS=3: %d processors, want 3", n)
	}
}
