package provider

import (
	"maps"
	"testing"
)

// TestQuietSDKLogs: the framework's and the protocol's logs are turned off only when no
// terraform-plugin-log variable asks for logs; any one of them keeps every default.
// Fails when: a variable set by the user is overridden, or nothing is turned off without one.
func TestQuietSDKLogs(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{"no log asked for", map[string]string{"HOME": "/root"},
			map[string]string{"HOME": "/root", "TF_LOG_SDK_FRAMEWORK": "OFF", "TF_LOG_SDK_PROTO": "OFF"}},
		{"TF_LOG", map[string]string{"TF_LOG": "DEBUG"}, map[string]string{"TF_LOG": "DEBUG"}},
		{"TF_LOG_PROVIDER", map[string]string{"TF_LOG_PROVIDER": "TRACE"}, map[string]string{"TF_LOG_PROVIDER": "TRACE"}},
		{"TF_LOG_SDK", map[string]string{"TF_LOG_SDK": "INFO"}, map[string]string{"TF_LOG_SDK": "INFO"}},
		{"TF_LOG_SDK_FRAMEWORK", map[string]string{"TF_LOG_SDK_FRAMEWORK": "TRACE"}, map[string]string{"TF_LOG_SDK_FRAMEWORK": "TRACE"}},
		{"TF_LOG_SDK_PROTO, even empty", map[string]string{"TF_LOG_SDK_PROTO": ""}, map[string]string{"TF_LOG_SDK_PROTO": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := maps.Clone(tc.env)
			quietSDKLogs(func(k string) (string, bool) { v, ok := env[k]; return v, ok },
				func(k, v string) error { env[k] = v; return nil })
			if !maps.Equal(env, tc.want) {
				t.Errorf("environment %v, want %v", env, tc.want)
			}
		})
	}
}
