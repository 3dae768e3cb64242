package plan

import (
	"cmp"
	"fmt"
	"regexp"
	"sync"
)

// queueNamePattern is what a queue may be called. agora.yaml's queues: follow the same rule
// (internal/config); TestQueueName_AgreesWithConfig keeps the two equal.
var queueNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })

// CheckQueueName checks the form of a queue name; whether agora.yaml declares it is for
// [Refs] to say.
func CheckQueueName(name string) error {
	if !queueNamePattern().MatchString(name) {
		return fmt.Errorf("invalid queue name %q: use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// queue checks the plan's queue. The default queue, named or not, is "": the same plan
// either way.
func (v *validator) queue(name string) string {
	if name == "" || name == DefaultQueue {
		return ""
	}
	if err := CheckQueueName(name); err != nil {
		v.add("queue", "%v", err)
	}
	return name
}

// QueueName is the queue the plan's run takes its slots from: [Plan.Queue], or
// [DefaultQueue] when that is "".
func (p *Plan) QueueName() string {
	return cmp.Or(p.Queue, DefaultQueue)
}
