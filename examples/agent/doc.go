// Command agent is the example node agent: it keeps kernel settings
// (sysctls), routes and iptables rules in line with a desired-state file,
// or, in fleet mode, with a fleet's desired state in etcd.
//
//	agent run --desired desired.yaml      reconcile (in a private network
//	                                      namespace unless --netns says
//	                                      otherwise)
//	agent run --etcd-endpoints H:P,... --node NAME
//	                                      the same, from etcd (fleet mode)
//	agent fleet apply -f FILE [--node N]  make FILE the fleet's (or one
//	                                      node's) desired state
//	agent fleet apply -f FILE --rollout STEPS [--canary-nodes A,B] ...
//	                                      the same fleet-wide in steps, each
//	                                      gated by its nodes' ACK or NACK,
//	                                      rolled back on failure
//	agent fleet rollout status|resume|abort|history
//	                                      the rollout under way; the last 20
//	agent fleet status|watch              every node, live or lost: revision
//	                                      reached, received, applied, objects,
//	                                      errors; "applied on N of M nodes at
//	                                      revision R" (and " (K lost)"); during
//	                                      a rollout, its line and no revision
//	agent fleet status --wait [--revision R] [--timeout D]
//	                                      exit 0 once every live node applied
//	                                      R and no rollout is under way, 1 on a
//	                                      node's error, 2 on timeout
//	agent fleet forget NODE               stop listing a lost node
//	agent diff [--netns ...] [--format ...]  what a run would change, changing
//	                                      nothing (exit 0: nothing, 1: changes,
//	                                      2: trouble)
//	agent status [--netns NS] [--format ...]  health tree and per-table counts
//	agent db show TABLE [--format ...]    dump a table of the running agent
//	agent db watch TABLE                  stream a table's changes (across
//	                                      agent restarts; and the other
//	                                      queries of statedbcmd: db help
//	                                      shows each index's key format)
//	agent cleanup [--dry-run]             remove what killed agents left
//
// Files, signals and leftovers: each managed namespace has its socket and
// lock in a run directory (see leftovers.go: /run/steadystate-agent/NS.sock
// for root); the client commands find the socket from --netns. Before
// anything is made or applied, run takes the lock and checks the socket,
// so a second agent on the same namespace fails at once, and sweeps the
// sandbox namespaces and sockets of dead agents. SIGINT and SIGTERM stop
// the agent; SIGHUP stops a sandbox agent too, and makes an agent on
// --netns host or NAME read the desired file again.
//
// The durable record (--state-dir, see state.go and record.go): a bbolt
// database per managed namespace with the sysctl target's original values
// (saved before each first change, so that a restarted agent, even after
// SIGKILL, restores them), per table what its target applied (not for
// routes: the kernel marks each with the agent's protocol, which is all
// their prune and delete go by), and how iptables shows the rules.
//
// A restart over an unchanged state writes nothing to the kernel: routes
// are compared with one listing per table and round, rules are recognized
// in their chains by the texts the record keeps, sysctls are read before
// they are written, and the record itself is written only where it
// differs. The agent is Ready once every object was reconciled once, and
// the log has a summary line per table (TestRestartWritesNothing,
// BenchmarkRestart).
//
// The status API (socket, and --metrics-addr when set): /status, /statedb/,
// /metrics, /healthz (200 only when the whole health tree is OK: 503 while
// starting, Degraded, Unknown or Stopped), /livez, /readyz (see
// agentReady). A part that is off (fleet mode in file mode, the file
// loader in fleet mode) reports OK saying so, so a healthy agent has no
// Unknown scope. The agent's own metrics are steadystate_agent_* (see
// metrics.go).
//
// Under systemd (a unit of Type=notify, NOTIFY_SOCKET set; see notify.go)
// the agent sends READY=1 once, at the moment /readyz turns 200 (the first
// desired state in every table and every object of it tried once, in
// either mode), with each table's counts by status as its STATUS;
// STATUS lines before (loading the file, a rejected file and why) and
// after (each file loaded or rejected); STOPPING=1 when it begins to
// stop. An unprivileged agent's sandboxed child notifies through the
// process systemd started (notifyRelay). A failed notification is logged
// once and changes nothing.
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
//	  desired        the file loader (a job watching the file) and a
//	                 progress log
//	  first-rounds   holds the prunes back until every object of the
//	                 first desired state was tried
//	  fleet          fleet mode (fleet.go): a reflector per table from
//	                 etcd, the node's status published under a lease
//	  api            the status API's handlers and socket
//	  notify         READY=1 and STOPPING=1 to systemd (NOTIFY_SOCKET)
//
// The agent gives the example cells their target configs (all in the
// namespace of --netns) and decorates their reconciler configs with its
// prune interval (--prune-interval, 1m) and refresh interval
// (--refresh-interval, 10m: applied objects are checked again at that age,
// at a limited rate; routes and rules in rounds, each checked against one
// listing of the kernel's, so a pass over 50,000 routes and 10,000 rules
// takes half a second). The refresh is a backstop: the targets report drift
// as it happens (route and link notifications; nf_tables notifications, or
// a read of the chains every 10s on iptables-legacy; a read of the sysctls
// every 5s), and the reconcilers repair it at once. The targets plan
// first, so a check that finds nothing to do writes nothing. `agent
// status` shows per table how much drift was repaired and the latest
// repairs (what, when, how found). The loader is the only writer of desired
// objects. It registers an initializer on each table and marks it done
// after the first good load, so no reconciler prunes before the file was
// read; the prunes also wait until every object of that first load was
// tried once (/readyz 200, READY=1), so that none competes with the first
// rounds (firstrounds.go). It applies only a whole file (see watch.go: fsnotify on the file's
// directory, --settle-time, a re-read after parsing, no writer holding the
// file open, --reload-interval as a fallback poll); write the file via
// rename to be safe. An empty file, or one that does not parse or
// validate, is reported (log, steadystate_agent_desired_loads_total
// {result="rejected"}, and the health scope agent.desired.desired-file
// Degraded, naming the file and the problem) and the current desired
// state is kept; `{}` removes all desired state.
//
// Fleet mode (--etcd-endpoints, see fleet.go) replaces the loader with
// three reflectors fed by the etcd module's Source (the fleet-wide objects
// and the node's own, the node's winning on a shared name); the first list
// of each table marks its initializer done, and /readyz waits for it.
// --etcd-prefix (/steadystate/v1), --etcd-cacert, --etcd-cert and
// --etcd-key choose the cluster's keys and TLS; --node (the hostname) is
// claimed under a lease of --status-ttl (10s), so a second live agent of the
// same name refuses to start and a dead one leaves the fleet view within
// the TTL. The node's status (the etcd revision reached: the least of its
// three reflectors', those of unchanged tables moved on by progress
// notifications; counts by status; the latest errors) is written when the
// tables changed or a change was caught up with, at a limited rate, and
// otherwise at most once a minute (etcd's revision moves with every
// node's write). With etcd servers older than 3.4.31 or 3.5.13 requested
// progress is not used, and a change to one table is reported applied
// only after etcd's own periodic progress notification (10 minutes by
// default). `agent fleet apply` validates a file exactly as the
// loader does; a bad file writes nothing. Everything else (namespace,
// durable record, status API, plans) is the same in both modes. A
// sandbox in fleet mode needs root: unprivileged, the agent would run in
// a network of its own, away from etcd.
package main
