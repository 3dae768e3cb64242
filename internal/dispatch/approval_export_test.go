package dispatch

import (
	"time"

	"github.com/agora-dev/agora/internal/modelgw"
)

// NewApprovalWaiter is the supervisor's approver of dispatch id, reading decisions back
// every poll, for BenchmarkApprovalPath.
func NewApprovalWaiter(records *Records, id, role string, timeout, poll time.Duration) modelgw.Approver {
	return &approvalWaiter{records: records, id: id, role: role, timeout: timeout, poll: poll}
}

// NewGatewayAuditor is the auditor a dispatch's gateway records through.
func NewGatewayAuditor(records *Records, id, role string) modelgw.Auditor {
	return &gatewayAuditor{records: records, id: id, role: role}
}
