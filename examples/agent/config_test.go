package main

import (
	"strings"
	"testing"
	"time"
)

// The documented defaults of `agent run`, and Validate naming the flag at
// fault.
func TestConfig(t *testing.T) {
	def := defaultConfig()
	if def.Desired != "desired.yaml" || def.NetNS != netnsSandbox || def.ReloadInterval != time.Second ||
		def.FullReconciliationInterval != time.Minute || def.RefreshInterval != 10*time.Minute {
		t.Fatalf("defaults %+v", def)
	}
	if err := def.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	for flag, edit := range map[string]func(*AgentConfig){
		"--desired":                      func(c *AgentConfig) { c.Desired = "" },
		"--socket":                       func(c *AgentConfig) { c.Socket = "" },
		"--reload-interval":              func(c *AgentConfig) { c.ReloadInterval = 0 },
		"--full-reconciliation-interval": func(c *AgentConfig) { c.FullReconciliationInterval = -time.Second },
		"--refresh-interval":             func(c *AgentConfig) { c.RefreshInterval = 0 },
	} {
		c := defaultConfig()
		edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag+":") {
			t.Errorf("%s: Validate = %v, want an error naming the flag", flag, err)
		}
	}
	if envSocket != "STEADYSTATE_AGENT_SOCKET" || envSandboxed != "STEADYSTATE_AGENT_SANDBOXED" {
		t.Errorf("environment variables %s, %s: want the one prefix STEADYSTATE_AGENT_", envSocket, envSandboxed)
	}
}
