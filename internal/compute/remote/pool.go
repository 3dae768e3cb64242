package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// Pool slots: a pod of an agent-sandbox SandboxWarmPool. Every pod of a pool comes from
// one SandboxTemplate, so no per-pod token can reach it through its spec (environment, Secret
// references). Its identity is the Kubernetes one instead: a projected ServiceAccount token,
// bound to the pod (the apiserver refuses it once the pod is gone), for an audience that is
// the gateway's alone (so the apiserver itself refuses it), mounted in the pod's init step
// only (never in the container the agent runs in). The init step presents it once:
//
//	POST /v1/pool/enroll   "Authorization: Bearer <projected token>"; 200 and an
//	                       [EnrollAnswer] (a fresh slot id and slot token) once the gateway
//	                       verified the token (TokenReview) and found it names a live pod of
//	                       agora's pool that never enrolled; 401 otherwise, and for ever after
//	                       for that pod
//
// and writes the answer to a file of a memory volume the worker's container reads once
// ([SlotFileEnv]) and removes. From there the pod is a warm slot like any other: the worker
// claims with the slot token (POST /v1/slots/SLOT/claim), the host binds the dispatch whose
// SandboxClaim the pool's controller gave this pod, and the slot token dies at the claim.
const (
	// EnrollRoute is the pool pods' enrolment.
	EnrollRoute = "/v1/pool/enroll"
	// SlotEnrollEnv, in a pool pod's init step, is the path of its projected token.
	SlotEnrollEnv = "AGORA_SLOT_ENROLL"
	// SlotFileEnv, in the init step and the worker's container of a pool pod, is the path of
	// the file the init step writes the enrolment's answer to and the worker reads and removes.
	SlotFileEnv = "AGORA_SLOT_FILE"
	// MaxEnrollToken caps a projected token presented for enrolment (they are ~1 KiB).
	MaxEnrollToken = 8 << 10
	// MaxEnrollAnswer caps the enrolment's answer.
	MaxEnrollAnswer = 1 << 10
)

// EnrollAnswer is the gateway's answer to an enrolment: the pod's slot and its token. Said
// once, over TLS, to the pod whose token it verified; never log it.
type EnrollAnswer struct {
	Slot  string `json:"slot"`
	Token string `json:"token"`
}

// PodVerifier verifies a pool pod's projected token: the apiserver authenticated it for the
// gateway's audience, it is bound to a pod that still exists with that uid, and that pod is a
// live, unclaimed pod of agora's pool. Its errors must not carry the token.
type PodVerifier interface {
	VerifyPod(ctx context.Context, token string) (PodIdentity, error)
}

// PodIdentity is what a verified projected token says of its pod.
type PodIdentity struct {
	Namespace string
	Name      string
	// UID is the pod's uid: a slot is enrolled once per uid, ever.
	UID string
}

// ParseEnrollAnswer reads an enrolment's answer strictly: exactly a slot id and a slot token
// (the gateway's token shape: "agw_" and at most 128 bytes), nothing else.
func ParseEnrollAnswer(b []byte) (EnrollAnswer, error) {
	var a EnrollAnswer
	if len(b) > MaxEnrollAnswer {
		return EnrollAnswer{}, errors.New("enrolment answer too long")
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&a); err != nil || d.More() {
		return EnrollAnswer{}, errors.New("the enrolment answer is not a slot and its token")
	}
	if !ValidSlotID(a.Slot) || !strings.HasPrefix(a.Token, "agw_") || len(a.Token) > 128 || len(a.Token) < 20 {
		return EnrollAnswer{}, errors.New("the enrolment answer names no valid slot and token")
	}
	return a, nil
}

// ValidPodUID reports whether s has the shape of a Kubernetes uid: a UUID in its canonical
// lowercase text form (36 bytes). It names files of the gateway's, so nothing else passes.
func ValidPodUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
