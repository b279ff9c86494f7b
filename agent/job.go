package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"renga.dev/renga/gen/client"
)

// Jobs the agent runs. An agent never runs a job's command as a program or a shell: a job
// names one of these built-in commands, and anything else fails (exit code 127) saying which
// commands exist. Owners can queue jobs; running arbitrary commands on customers' hosts is
// not something a job may do.
var builtinJobs = map[string]func(context.Context, *Agent) (string, error){
	// facts collects host facts now and queues them as an observation.
	"facts": func(ctx context.Context, a *Agent) (string, error) {
		kind, data, err := a.collect(ctx)
		if err != nil {
			return "", err
		}
		seq, _, err := a.queue.Add(kind, time.Now(), data)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("queued %s as observation %d", kind, seq), nil
	},
	// status reports the agent's installation, home and queue.
	"status": func(_ context.Context, a *Agent) (string, error) {
		s, err := a.Status()
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(s)
		return string(b), err
	},
}

// BuiltinJobNames lists the commands a job may name.
func BuiltinJobNames() []string { return []string{"facts", "status"} }

func (a *Agent) runJob(ctx context.Context, command string) client.JobResult {
	code := 0
	fn, ok := builtinJobs[strings.TrimSpace(command)]
	if !ok {
		code = 127
		out := fmt.Sprintf("unknown command %q: this agent runs only its built-in jobs (%s)", command, strings.Join(BuiltinJobNames(), ", "))
		return client.JobResult{Status: client.JobResultStatusFailed, ExitCode: &code, Output: &out}
	}
	out, err := fn(ctx, a)
	if err != nil {
		code = 1
		out = err.Error()
		return client.JobResult{Status: client.JobResultStatusFailed, ExitCode: &code, Output: &out}
	}
	return client.JobResult{Status: client.JobResultStatusSucceeded, ExitCode: &code, Output: &out}
}
