package entry

import "strings"

// Subjects: what an entry is about. Each is "NOUN/NAME"; a task is under its run.

// Dispatch is the subject of a dispatch's entries: "dispatch/ID".
func Dispatch(id string) string { return "dispatch/" + id }

// DispatchOf returns the dispatch id of a [Dispatch] subject and whether it is one.
func DispatchOf(subject string) (string, bool) { return strings.CutPrefix(subject, "dispatch/") }

// Run is the subject of a run's entries: "run/ID".
func Run(id string) string { return "run/" + id }

// Task is the subject of a task's entries: "run/RUN/task/TASK".
func Task(runID, taskID string) string { return "run/" + runID + "/task/" + taskID }

// SplitRun parses a [Run] or [Task] subject; both are "" when s is neither.
func SplitRun(s string) (runID, taskID string) {
	rest, ok := strings.CutPrefix(s, "run/")
	if !ok {
		return "", ""
	}
	runID, taskID, _ = strings.Cut(rest, "/task/")
	return runID, taskID
}

// Schedule is the subject of a schedule's entries: "schedule/NAME".
func Schedule(name string) string { return "schedule/" + name }

// CatalogItem is the subject of a catalog change: "KIND/NAME" ("capability/repo-tools").
func CatalogItem(kind, name string) string { return kind + "/" + name }

// Manifest is the subject of an `agora apply`: "manifest/BASENAME".
func Manifest(base string) string { return "manifest/" + base }

// ClaudeAgents is the subject of an `agora import claude-agents`: "claude-agents/BASENAME".
func ClaudeAgents(base string) string { return "claude-agents/" + base }

// MCPTool is the subject of an MCP tool call: "mcp/TOOL".
func MCPTool(tool string) string { return "mcp/" + tool }

// MCPResource is the subject of every MCP resource read.
const MCPResource = "mcp/resource"

// GatewayActor is the actor of what a dispatch's sandbox did (its gateway, proxy and tool
// decisions): "dispatch/ID ROLE".
func GatewayActor(id, role string) string { return Dispatch(id) + " " + role }

// RoleOf returns the role of a [GatewayActor], "" for any other actor.
func RoleOf(actor string) string {
	_, role, _ := strings.Cut(actor, " ")
	return role
}

// OrchActor is the actor of every entry the orchestrator's engine writes.
const OrchActor = "orch"

// Lease is the subject of the leader entries: lease/NAMESPACE/NAME.
func Lease(namespace, name string) string { return "lease/" + namespace + "/" + name }

// Replica is the subject of a generation of a database's replica: replica/DB/GENERATION.
func Replica(db, generation string) string { return "replica/" + db + "/" + generation }

// SelftestTarget is the subject of a [SelftestRun] entry: the target the corpus ran on.
func SelftestTarget(name string) string { return "target/" + name }
