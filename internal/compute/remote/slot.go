package remote

// Warm slots over the network gateway. A slot is a worker container or pod started
// ahead of any dispatch, holding only a per-slot token. Its worker asks the gateway for its
// dispatch (POST ClaimRoute with "Authorization: Bearer SLOT_TOKEN"); the host binds a
// dispatch to the slot when one comes, and the gateway answers that request with the
// dispatch's id and session token ([SlotGrant]) after revoking the slot's token: a slot is
// claimed once, and its token opens nothing else, ever (not a dispatch's routes, not another
// slot's claim). The worker then runs as a cold one does with that dispatch's token.
//
//	POST /v1/slots/SLOT/claim     200 and a SlotGrant once a dispatch is bound; 204 when none
//	                              was bound within the gateway's wait (ask again); 401 once
//	                              the slot was claimed, revoked or its holder is gone
const (
	SlotRoutePrefix = "/v1/slots/"
	ClaimRoute      = "claim"
	// SlotEnv names the slot id in a warm worker's environment; its token arrives in
	// [TokenEnv], exactly as a dispatch's token does in a cold worker (from a Secret), and is
	// taken out of the environment the same way before anything else runs.
	SlotEnv = "AGORA_SLOT_ID"
	// MaxSlotGrant caps a claim's answer.
	MaxSlotGrant = 4 << 10
)

// SlotGrant is the answer to a slot's claim: the dispatch bound to it and that dispatch's
// session token. It is said once, to the slot's own token, over TLS; never log it.
type SlotGrant struct {
	Dispatch string `json:"dispatch"`
	Token    string `json:"token"`
}

// ValidSlotID reports whether id has the shape of a slot id: "s" and 32 lowercase hex digits.
func ValidSlotID(id string) bool {
	if len(id) != 33 || id[0] != 's' {
		return false
	}
	for _, c := range []byte(id[1:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
