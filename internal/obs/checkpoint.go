package obs

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CheckpointAge reports, when scraped, how old each log's newest signed checkpoint is and
// how many entries the log holds beyond it: a checkpointer that stopped shows as a growing age.
type CheckpointAge struct {
	DBs []NamedDB
	Now func() time.Time
}

// checkpointDescSet describes the checkpoint gauges; made on first scrape, not at init.
type checkpointDescSet struct {
	checkpointAge, logSize, uncheckpointed *prometheus.Desc
}

var checkpointDescs = sync.OnceValue(func() checkpointDescSet {
	return checkpointDescSet{
		checkpointAge:  prometheus.NewDesc("agora_audit_checkpoint_age_seconds", "Age of the newest signed checkpoint of each audit log (absent: none yet).", []string{"log"}, nil),
		logSize:        prometheus.NewDesc("agora_audit_log_entries", "Entries in each audit log.", []string{"log"}, nil),
		uncheckpointed: prometheus.NewDesc("agora_audit_uncheckpointed_entries", "Entries of each audit log not yet covered by a checkpoint.", []string{"log"}, nil),
	}
})

// Describe implements prometheus.Collector.
func (c CheckpointAge) Describe(ch chan<- *prometheus.Desc) {
	ch <- checkpointDescs().checkpointAge
	ch <- checkpointDescs().logSize
	ch <- checkpointDescs().uncheckpointed
}

// Collect implements prometheus.Collector.
func (c CheckpointAge) Collect(ch chan<- prometheus.Metric) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	for _, d := range c.DBs {
		var size, cpSize int64
		var at string
		err := d.DB.SQL().QueryRowContext(ctx, `SELECT COALESCE((SELECT size FROM audit_tree WHERE id = 0), 0),
			COALESCE((SELECT size FROM audit_checkpoints ORDER BY size DESC LIMIT 1), 0),
			COALESCE((SELECT at FROM audit_checkpoints ORDER BY size DESC LIMIT 1), '')`).Scan(&size, &cpSize, &at)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(checkpointDescs().logSize, prometheus.GaugeValue, float64(size), d.Name)
		ch <- prometheus.MustNewConstMetric(checkpointDescs().uncheckpointed, prometheus.GaugeValue, float64(max(size-cpSize, 0)), d.Name)
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			ch <- prometheus.MustNewConstMetric(checkpointDescs().checkpointAge, prometheus.GaugeValue, now().Sub(t).Seconds(), d.Name)
		}
	}
}
