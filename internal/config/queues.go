package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Queues bound how many tasks run at once across all the runs that name them:
//
//	queues:
//	  default: {concurrency: 8}
//	  nightly: {concurrency: 2}
//
// A plan names its queue (queue: nightly); one that names none is on DefaultQueue, which
// exists whether or not agora.yaml declares it.
type Queue struct {
	// Concurrency is how many tasks of the queue's runs may run at once, all runs together
	// (each run's own concurrency and its locks still apply): 1 to MaxQueueConcurrency.
	Concurrency int `yaml:"concurrency"`
}

// DefaultQueue is the queue of a plan that names none (plan.DefaultQueue says the same).
const DefaultQueue = "default"

// DefaultQueueConcurrency is the default queue's concurrency when agora.yaml does not declare
// it: enough for several runs at their default concurrency (4) side by side, few enough that
// a burst of runs does not start a sandbox per task at once.
const DefaultQueueConcurrency = 16

// MaxQueueConcurrency is the largest concurrency a queue may have.
const MaxQueueConcurrency = 4096

// queueNamePattern is what a queue may be called; the plan's queue: field accepts the same
// names (internal/orch/plan, TestQueueName_AgreesWithConfig).
var queueNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })

// validateQueues checks the queues section and declares the default queue when it is absent.
func (c *Config) validateQueues(pos *strictyaml.Positions) strictyaml.Errors {
	var errs strictyaml.Errors
	for _, n := range slices.Sorted(maps.Keys(c.Queues)) {
		p := "queues." + n
		if !queueNamePattern().MatchString(n) {
			errs = append(errs, pos.Errorf(p, "invalid queue name %q: use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit", n))
			continue
		}
		if q := c.Queues[n]; q.Concurrency < 1 || q.Concurrency > MaxQueueConcurrency {
			errs = append(errs, pos.Errorf(p+".concurrency", "want 1 to %d, got %d", MaxQueueConcurrency, q.Concurrency))
		}
	}
	if _, ok := c.Queues[DefaultQueue]; !ok {
		if c.Queues == nil {
			c.Queues = map[string]Queue{}
		}
		c.Queues[DefaultQueue] = Queue{Concurrency: DefaultQueueConcurrency}
	}
	return errs
}

// QueueNames lists the declared queues, sorted (the default queue among them).
func (c *Config) QueueNames() []string { return slices.Sorted(maps.Keys(c.Queues)) }

// QueueConcurrency returns the concurrency of each declared queue.
func (c *Config) QueueConcurrency() map[string]int {
	out := make(map[string]int, len(c.Queues))
	for n, q := range c.Queues {
		out[n] = q.Concurrency
	}
	return out
}

// CheckQueue reports whether agora.yaml declares queue name, naming the declared ones when
// it does not.
func (c *Config) CheckQueue(name string) error {
	if _, ok := c.Queues[name]; ok {
		return nil
	}
	return fmt.Errorf("queue %q is not declared in agora.yaml; known: %s", name, strings.Join(c.QueueNames(), ", "))
}
