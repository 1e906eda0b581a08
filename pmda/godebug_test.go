package main

import (
	"debug/buildinfo"
	"slices"
	"strings"
	"testing"
)

// The agent is built with updatemaxprocs=0 (runtime.go), so that the
// runtime starts no goroutine to follow GOMAXPROCS and sysmon reads no
// cgroup limit every second; a GODEBUG line lost from runtime.go, or one
// the go.mod's language version overrides, shows here.
func TestAgentKeepsItsGOMAXPROCS(t *testing.T) {
	info, err := buildinfo.ReadFile(agentELF(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "DefaultGODEBUG" {
			if !slices.Contains(strings.Split(s.Value, ","), "updatemaxprocs=0") {
				t.Errorf("the agent's DefaultGODEBUG is %q, without updatemaxprocs=0", s.Value)
			}
			return
		}
	}
	t.Errorf("the agent was built with no DefaultGODEBUG setting; want updatemaxprocs=0 (settings: %v)", info.Settings)
}
