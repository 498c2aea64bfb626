// Package setup is `mother setup DATA`: it writes DATA/config.json by
// asking (in a terminal) or from flags (for automation), and checks every
// answer live before it is kept: chat tokens against their platform with
// the adapters' own clients (the bot user, its guilds or workspace, a
// Socket Mode connection), admins picked from the users the platform
// lists, the Ollama server and its models (with their tool support), each
// Docker host (reachable, API version, the chick image), and TLS client
// material for a tcp:// Docker host generated on request. It offers the
// status page on loopback (metrics.listen, 127.0.0.1:9464 or the next
// free port), and its next steps give the page's address.
//
// Setup edits config.json in place: fields it does not ask about, unknown
// ones included, keep their values and order; a rerun shows what is there
// and changes only what the operator changes. The file is written
// atomically with mode 0600 and then loaded with the daemon's own
// validation.
package setup
