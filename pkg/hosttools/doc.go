// Package hosttools runs Mother's host-side custom tools: the Model Context
// Protocol servers declared in config.json's mcpServers (ARCHITECTURE.md
// decision 7), through the official Go SDK.
//
// A Manager starts every enabled stdio server (a command) and connects to
// every streamable HTTP server (a URL), discovers their tools, and keeps
// each one alive on its own: a server that crashes, exits or cannot be
// reached is retried with exponential backoff while the others go on, and
// nothing a server does can stop Mother. Apply reconciles the running set
// with a new configuration (servers added, removed or changed are started,
// stopped or restarted; unchanged ones keep running), so config.json can be
// reloaded without a restart.
//
// Call runs one tool by its qualified name ("server.tool"): the arguments
// are validated against the tool's JSON input schema before anything is
// sent, the call has the server's timeout, and every failure (unknown tool,
// bad arguments, timeout, a server crashing mid-call, an error result)
// comes back as clear text for the model. InvokeTool is Mother's
// invoke_tool agent tool on top of it; PromptTools describes the tools for
// the system prompt; ChickInvoker is the allow-listed path for chicks
// (config chicks.hostTools) that the nest calls.
package hosttools
