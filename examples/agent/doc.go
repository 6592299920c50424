// Command agent is the example node agent: it keeps kernel settings
// (sysctls), routes and iptables rules in line with a desired-state file.
//
//	agent run --desired desired.yaml      reconcile (in a private network
//	                                      namespace unless --netns says
//	                                      otherwise)
//	agent diff [--netns ...] [--format ...]  what a run would change, changing
//	                                      nothing (exit 0: nothing, 1: changes,
//	                                      2: trouble)
//	agent status                          health tree and per-table counts
//	agent db show TABLE [--format ...]    dump a table of the running agent
//	agent db watch TABLE                  stream a table's changes
//
// Every flag of `agent run` can be set from the environment with the
// prefix STEADYSTATE_AGENT_ (STEADYSTATE_AGENT_NETNS=host); the hive reads
// them, and a flag on the command line wins.
//
// It is assembled with hive from these cells (`agent run cells` prints
// them):
//
//	statedb          the database
//	metrics          the hive's HTTP server: /metrics and /healthz on
//	                 --metrics-addr (optional), and the status API's socket
//	agent            config (--desired, --netns, --socket, intervals) and
//	                 the network namespace (Namespace: made at start,
//	                 removed at stop)
//	  sysctl         sysctl.Cell: table, target and reconciler
//	  routes         routes.Cell
//	  iptables       iptables.Cell
//	  desired        the file loader (a timer job) and a progress log
//	  api            the status API's handlers and socket
//
// The agent gives the example cells their target configs (all in the
// namespace of --netns) and decorates their reconciler configs with its
// prune interval (--full-reconciliation-interval, 1m) and refresh interval
// (--refresh-interval, 10m: applied objects are re-applied at that age, at
// a limited rate, which repairs drift; the targets plan first, so a
// refresh that finds nothing to do writes nothing). The loader is the only writer of desired
// objects. It registers an initializer on each table and marks it done
// after the first good load, so no reconciler prunes before the file was
// read. A file that does not parse or validate is reported (log, and the
// health scope agent.desired.desired-file Degraded, naming the file and
// the problem) and the current desired state is kept.
package main
