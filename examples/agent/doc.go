// Command agent is the example node agent: it keeps kernel settings
// (sysctls), routes and iptables rules in line with a desired-state file.
//
//	agent run --desired desired.yaml      reconcile (in a private network
//	                                      namespace unless --netns says
//	                                      otherwise)
//	agent status                          health tree and per-table counts
//	agent db show TABLE [--format ...]    dump a table of the running agent
//	agent db watch TABLE                  stream a table's changes
//
// It is assembled with hive from these cells:
//
//	statedb          the database
//	metrics          /metrics and /healthz on --metrics-addr (optional)
//	agent            config (--desired, --netns, --socket) and the network
//	                 namespace to manage
//	  desired        the three tables, the file loader and a progress log
//	    sysctl       the sysctl reconciler
//	    routes       the routes reconciler
//	    iptables     the iptables reconciler
//	  api            the status API on a unix socket
//
// The loader is the only writer of desired objects. It registers an
// initializer on each table and marks it done after the first good load,
// so no reconciler prunes before the file was read. A file that does not
// parse or validate is reported (log and Degraded health naming the file
// and the problem) and the current desired state is kept.
package main
