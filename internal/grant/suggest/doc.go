// Package suggest proposes a grant from what dispatches did: `agora capability suggest`. It
// reads evidence (audit entries of agora.db: the worker's tool decisions, the egress proxy's
// connections and refusals, learn mode's would-deny entries, and the command an exec
// subagent runs) and writes a capability.yaml a person reviews and registers. It never
// registers anything, and it has no MCP surface: it is a deploy-time command of the CLI.
//
// Used, not tried: a host or request is proposed only when the egress proxy let it through
// (a connection the dispatch's grant admitted; in a learn dispatch, a host egress.learn_hosts
// admitted, its net.would_deny, and the requests made to it). What the proxy refused
// (net.connect deny, net.request), in any dispatch, is [Proposal.ProxyRefused]: listed for a
// person as what the agent tried, never proposed, never written.
//
// The evidence was produced inside sandboxes by agents, so it is hostile. What an agent can
// put into it must never become more than it did:
//
//   - A command is proposed word for word: each glob character (* ? [ \) is escaped, so a
//     word "*" is the literal argument "*", never a wildcard. A word holding white space, a
//     control or non-ASCII byte, or an empty word, cannot be written as a pattern and is
//     refused (listed, never proposed); so are argvs of more than [maxWords] words or words
//     longer than [maxWordLen].
//   - A host is proposed exactly as it was reached: a lowercase name or a canonical IP
//     literal, with the port seen. Generalisation never produces "*.domain", an IP range or
//     a port wildcard; a host the grant grammar refuses is refused.
//   - A path is proposed only when it is a valid path prefix ([grant.EgressRule.Validate]:
//     no "%", "..", ".", empty segment, control or non-ASCII byte) and was not cut by the
//     proxy's record ([maxRecordedPath]).
//   - Text shown to people (the plain-language list, refusals) is ASCII: anything else in
//     the evidence is quoted with escapes, so a name cannot carry a newline or an ANSI
//     escape into a terminal or a review.
//
// Generalisation (off with --narrow, which proposes only literals):
//
//   - Commands: argvs of one program and length that differ only in their last word, with at
//     least [minAgree] distinct last words, none starting with "-", become one pattern whose
//     last word is their common directory prefix and "[^./]*" (path.Match: one name directly
//     under that directory, never "..", "." or a dotfile: a bare "*" would admit "dir/..",
//     the directory above, which no observation reached). Never when the program runs code it is given ([launchers]: shells, interpreters,
//     env, xargs, ...) or the fixed words include a code flag ("-c", "-e", ...), and never
//     into a pattern that runs any shell line ([grant.CommandPattern.RunsAnyLine]).
//   - Paths: at least [minAgree] distinct paths of one host, port and method directly under
//     one parent directory of at least one segment become that parent as a prefix ("/a/b/").
//     Never "/".
//
// What the audit does not record cannot be proposed from evidence: an allowed tool call's
// arguments are kept only as a hash, and outside learn mode the proxy records a request's
// method and path only when it refuses it. For those, the rules of the dispatch's own grant that admitted
// them are kept (narrowed to the host and port seen), and the list says so. The current
// grant's approve rules are always kept: they only hold calls back for a person.
//
// Where evidence comes from matters: hosts and requests are what the host's egress proxy saw;
// tools and commands are what the sandbox's worker reported through the gateway, which an
// agent reaching the gateway could forge (a tool reported allowed outside the grant is refused
// as such, except after a learn dispatch's would_deny). An exec subagent's command is read from
// its subagent document, never from the line learn records; a command line at the record's cap
// may have been cut and is refused.
//
// suggest runs on the host only; it imports grant, the audit vocabulary and the catalog's
// capability parser (to prove the file it writes reads back as proposed).
package suggest
