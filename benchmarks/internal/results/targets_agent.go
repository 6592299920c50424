package results

// PkgAgent is the example agent's package (examples/agent), whose
// benchmarks run the agent as its own process in a namespace.
const PkgAgent = module + "/examples/agent"

// agentTargets are the goals of the scale issue for the example agent at
// 50,000 routes, 10,000 rules and the sample's sysctls (examples/agent
// BenchmarkRestart, BenchmarkColdStart, BenchmarkEdit and
// BenchmarkRefreshPass): a restart over an unchanged state Ready within a
// second, a cold start as fast as `ip -batch` plus `iptables-restore` of
// the same state (at both sizes), a peak RSS of at most 200 MB cold or
// after a restart, one edit in the kernel within 100 ms of the rename (the
// mean, and the first after a start on its own), and
// a full refresh pass within 10 s on one core.
var agentTargets = []Target{
	{
		Name:    "agent: 50k routes, 10k rules, restart over an unchanged state to Ready",
		Subject: Ref{PkgAgent, "BenchmarkRestart/routes=50000/rules=10000", ""},
		Metrics: []string{"restart-s"}, AtMost: true, Limit: 1, Unit: " s",
	},
	{
		Name:    "agent: 10k routes, 2k rules, cold start to Ready vs ip -batch + iptables-restore",
		Subject: Ref{PkgAgent, "BenchmarkColdStart/routes=10000/rules=2000", ""},
		Metrics: []string{"x-tools"}, AtMost: true, Limit: 1, Unit: "x",
	},
	{
		Name:    "agent: 50k routes, 10k rules, cold start to Ready vs ip -batch + iptables-restore",
		Subject: Ref{PkgAgent, "BenchmarkColdStart/routes=50000/rules=10000", ""},
		Metrics: []string{"x-tools"}, AtMost: true, Limit: 1, Unit: "x",
	},
	{
		Name:    "agent: 50k routes, 10k rules, peak RSS of a cold start",
		Subject: Ref{PkgAgent, "BenchmarkColdStart/routes=50000/rules=10000", ""},
		Metrics: []string{"vmhwm-MB"}, AtMost: true, Limit: 200, Unit: " MB",
	},
	{
		Name:    "agent: 50k routes, 10k rules, peak RSS after a restart",
		Subject: Ref{PkgAgent, "BenchmarkRestart/routes=50000/rules=10000", ""},
		Metrics: []string{"vmhwm-MB"}, AtMost: true, Limit: 200, Unit: " MB",
	},
	{
		Name:    "agent: one edit of 50,000 routes and 10,000 rules, rename into place to the route in the kernel, mean",
		Subject: Ref{PkgAgent, "BenchmarkEdit/routes=50000/rules=10000", ""},
		Metrics: []string{"edit-ms"}, AtMost: true, Limit: 100, Unit: " ms",
	},
	{
		Name:    "agent: the first edit after a start of 50,000 routes and 10,000 rules, rename into place to the route in the kernel",
		Subject: Ref{PkgAgent, "BenchmarkEdit/routes=50000/rules=10000", ""},
		Metrics: []string{"edit-first-ms"}, AtMost: true, Limit: 100, Unit: " ms",
	},
	{
		Name:    "agent: a full refresh pass by age over 50,000 routes and 10,000 rules, GOMAXPROCS=1",
		Subject: Ref{PkgAgent, "BenchmarkRefreshPass/routes=50000/rules=10000", ""},
		Metrics: []string{"refresh-pass-s"}, AtMost: true, Limit: 10, Unit: " s",
	},
}
