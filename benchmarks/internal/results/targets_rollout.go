package results

// rolloutTargets are the goals of the rollout issue (progressive rollouts
// of the fleet's desired state), read from the etcd module's
// BenchmarkRollout: 100 simulated agents on a 3-member etcd with 10,000
// desired objects.
var rolloutTargets = []Target{
	{
		Name:    "fleet rollout: 100 agents, one change in steps 1,10%,100%, time over 3 x p50 plain apply + 1s",
		Subject: Ref{PkgEtcd, "BenchmarkRollout/agents=100/objects=10000", ""},
		Metrics: []string{"rollout-budget-ratio"}, AtMost: true, Limit: 1, Unit: "x",
	},
	{
		Name:    "fleet rollout: 100 agents, a halt at the canary, its NACK until it applied the previous state again",
		Subject: Ref{PkgEtcd, "BenchmarkRollout/agents=100/objects=10000", ""},
		Metrics: []string{"halt-rollback-ms"}, AtMost: true, Limit: 1000, Unit: " ms",
	},
}
