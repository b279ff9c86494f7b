package main

import (
	"encoding/json"
	"log"
	"os"
	"time"
)

// counts is the number of mutants of each status.
func counts(ms []mutant) map[string]int {
	n := map[string]int{}
	for _, m := range ms {
		n[m.Status]++
	}
	return n
}

// killRate is the share of the mutants judged killed or lived that were killed, in percent (0
// when none was).
func killRate(n map[string]int) float64 {
	judged := n[killed] + n[lived]
	if judged == 0 {
		return 0
	}
	return 100 * float64(n[killed]) / float64(judged)
}

// report prints the counts and the survivors and writes the JSON report.
func report(c config, module string, ms []mutant, elapsed time.Duration) error {
	n := counts(ms)
	log.Printf("")
	for _, m := range ms {
		if m.Status == lived {
			log.Printf("LIVED %s at %s/%s (%s→%s)", m.Type, c.target, m.id(), m.From, m.To)
		}
	}
	rate := killRate(n)
	log.Printf("%d mutants in %s: killed %d, lived %d, timed out %d, not viable %d, not covered %d, not judged yet %d",
		len(ms), elapsed.Round(time.Second), n[killed], n[lived], n[timedOut], n[notViable],
		n[notCovered], n[runnable])
	log.Printf("kill rate: %d/%d = %.1f%% of the mutants judged killed or lived", n[killed], n[killed]+n[lived], rate)
	b, err := json.MarshalIndent(map[string]any{
		"go_module": module, "target": c.target, "run": c.run, "packages": c.packages,
		"counts": n, "kill_rate_percent": rate, "elapsed_seconds": elapsed.Seconds(), "mutants": ms,
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.output, b, 0o644)
}
