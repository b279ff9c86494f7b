package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/net"
)

// HostFactsKind is the kind of the observation HostFacts makes.
const HostFactsKind = "host.facts"

// HostFacts observes the host through gopsutil: hostname, OS, platform and kernel, uptime,
// CPUs and load, memory, and the addresses of the interfaces that are up.
func HostFacts(ctx context.Context) (string, map[string]any, error) {
	info, err := host.InfoWithContext(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("host facts: %w", err)
	}
	facts := map[string]any{
		"hostname":         info.Hostname,
		"os":               info.OS,
		"platform":         info.Platform,
		"platform_version": info.PlatformVersion,
		"kernel_version":   info.KernelVersion,
		"kernel_arch":      info.KernelArch,
		"uptime_seconds":   info.Uptime,
		"boot_time":        info.BootTime,
	}
	if n, err := cpu.CountsWithContext(ctx, true); err == nil {
		facts["cpu_count"] = n
	}
	if l, err := load.AvgWithContext(ctx); err == nil {
		facts["load"] = []float64{l.Load1, l.Load5, l.Load15}
	}
	if m, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		facts["memory_total_bytes"] = m.Total
		facts["memory_available_bytes"] = m.Available
	}
	if ifs, err := net.InterfacesWithContext(ctx); err == nil {
		addrs := []string{}
		for _, i := range ifs {
			if !slices.Contains(i.Flags, "up") || slices.Contains(i.Flags, "loopback") {
				continue
			}
			for _, a := range i.Addrs {
				addrs = append(addrs, a.Addr)
			}
		}
		facts["addresses"] = addrs
	}
	return HostFactsKind, facts, nil
}
