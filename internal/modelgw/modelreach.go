package modelgw

import (
	"net/http"
	"slices"
	"strings"
)

// A model request goes upstream with the gateway's key, so whatever it asks the provider to
// do is done on the dispatch's account and out of the grant's reach. Two kinds of request members are judged before anything is forwarded:
//
//   - Tools the provider runs itself: web search and fetch, remote MCP servers, code
//     execution, file search, image generation, computer use, and a background response.
//     They reach any host or server the request names (an egress no grant allowed: both
//     CLIs have web search turned off for that reason, docs/runtimes.md), cost per call
//     outside the tokens the meter counts, or, for a background response, answer without the
//     usage the gateway counts. They are refused whatever the budget. The tools an agent runs
//     itself (function and custom tools, OpenAI's shell and patch tools, Anthropic's bash,
//     text editor, computer and memory tools) and OpenAI's tool_search over them (what the
//     Codex CLI sends) pass.
//   - Rates above the standard one the meter prices a model at: OpenAI's service_tier
//     priority or scale, audio output, Anthropic's fast mode, US-only inference and the
//     1M-context beta. Under a usd budget the call would be undercounted, so they are refused
//     there; without one there is no sum of dollars to dodge.
//
// What the operator's own account defaults to (an OpenAI project whose default tier is
// priority, an Anthropic organisation with priority capacity) is the operator's setting and
// is not seen here: a usd budget assumes standard rates (docs/operations.md).

// openAIClientTools are the OpenAI tool types the agent's side runs (or that only search
// the tools the request itself defines).
var openAIClientTools = []string{"function", "custom", "tool_search", "local_shell", "shell", "apply_patch"}

// anthropicClientToolPrefixes are the Anthropic-defined tool types the client runs; a tool
// with no type, or "custom", is the client's own.
var anthropicClientToolPrefixes = []string{"bash_", "text_editor_", "computer_", "memory_"}

// openAITiers are the service tiers priced at or below the standard rate ("auto" is the
// project's default, the operator's setting).
var openAITiers = []string{"auto", "default", "flex"}

// dearBetas are the Anthropic beta features that change the rate a call is charged at.
var dearBetas = []string{"context-1m-", "fast-mode-"}

// checkReach refuses a model request that asks the provider to run a tool or to act beyond
// the call itself, or, when call is set and the dispatch has a usd budget, to charge above
// the standard rate; it reports whether the request may go on.
func (g *Gateway) checkReach(w http.ResponseWriter, ex *exchange, api string, mr *modelRequest, h http.Header, call bool) bool {
	if why := providerActs(api, mr); why != "" {
		g.refuseModel(w, ex, api, "request_not_allowed",
			"agora: "+why+"; the model provider would run it, out of this dispatch's grant and budget, so the request is refused before it is sent",
			"provider-run request refused: "+why)
		return false
	}
	if !call || g.meter.Budget().USD == 0 {
		return true
	}
	if why := dearerRate(api, mr, h); why != "" {
		g.refuseModel(w, ex, api, "request_not_priced",
			"agora: "+why+"; agora.yaml prices this model at its standard rate, so under a usd budget the call could not be counted and is refused before it is sent",
			"rate not priced under the usd budget: "+why)
		return false
	}
	return true
}

// providerActs says what of mr the provider would run itself, or "".
func providerActs(api string, mr *modelRequest) string {
	for _, t := range mr.Tools {
		typ := ""
		if t.Type != nil {
			typ = *t.Type
		}
		if api == APIAnthropic {
			if typ == "" || typ == "custom" || slices.ContainsFunc(anthropicClientToolPrefixes, func(p string) bool { return strings.HasPrefix(typ, p) }) {
				continue
			}
		} else if slices.Contains(openAIClientTools, typ) {
			continue
		}
		return "tool type " + quoted(typ, maxModelInError) + " is run by the model provider"
	}
	switch {
	case mr.Background != nil && *mr.Background:
		return `a background response ("background": true) is answered without the usage this dispatch's budget counts`
	case isSet(mr.WebSearchOptions):
		return `web search ("web_search_options") is run by the model provider`
	case isSet(mr.MCPServers):
		return `remote MCP servers ("mcp_servers") are called by the model provider`
	case isSet(mr.Container):
		return `a code execution container ("container") is run by the model provider`
	}
	return ""
}

// dearerRate says what of mr (and of its headers h) asks for a rate above the standard one,
// or "".
func dearerRate(api string, mr *modelRequest, h http.Header) string {
	if api == APIAnthropic {
		switch {
		case mr.Speed != nil && *mr.Speed != "standard":
			return `speed ` + quoted(*mr.Speed, maxModelInError) + ` is charged above the standard rate`
		case mr.InferenceGeo != nil && *mr.InferenceGeo != "global":
			return `inference_geo ` + quoted(*mr.InferenceGeo, maxModelInError) + ` is charged above the standard rate`
		}
		for _, v := range h.Values("Anthropic-Beta") {
			for _, b := range strings.Split(v, ",") {
				b = strings.TrimSpace(b)
				if slices.ContainsFunc(dearBetas, func(p string) bool { return strings.HasPrefix(b, p) }) {
					return "beta " + quoted(b, maxModelInError) + " is charged above the standard rate"
				}
			}
		}
		return ""
	}
	switch {
	case mr.ServiceTier != nil && !slices.Contains(openAITiers, *mr.ServiceTier):
		return `service_tier ` + quoted(*mr.ServiceTier, maxModelInError) + ` is charged above the standard rate`
	case slices.Contains(mr.Modalities, "audio") || isSet(mr.Audio):
		return "audio output is charged at its own rate"
	}
	return ""
}

// isSet reports whether a raw member is present and not null.
func isSet(raw []byte) bool { return len(raw) > 0 && string(raw) != "null" }
