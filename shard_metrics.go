package onetick

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics per shard (Config.Shards > 1; docs/shards.md, "Who reads the
// fleet"). Each shard's Elector keeps its own Metrics (BalancerConfig);
// the lease series of those are registered on the scheduler's Registerer
// with a constant label shard="N", in place of the scheduler's own,
// unlabeled ones:
//
//	scheduler_is_leader{shard}                  1 while this replica leads the shard with trust
//	scheduler_lease_epoch{shard}                the newest epoch of the shard's lease seen
//	scheduler_store_clock_offset_seconds{shard} measured at each round trip of the shard's lease
//	scheduler_renewal_latency_seconds{shard}    round trips of the shard's lease
//	scheduler_store_damaged{shard,state}        damage the shard's elector ran into
//	scheduler_standby_seconds_total{shard}      time spent as the shard's standby
//	scheduler_shards_led                        shards this replica leads with trust now
//
// Why not keep an unlabeled scheduler_is_leader ("any shard led") next
// to the labelled ones: one name has one set of label names on a
// registry (client_golang refuses the second registration), and an
// unlabeled series would add 1 to every sum by shard. The alert rules
// aggregate by shard instead (deploy/prometheus/alerts.yml), which reads
// the same with one shard, whose series have no shard label: with
// shards = 1 nothing changes, not a byte of /metrics.
//
// Fleet-wide series stay unlabeled: scheduler_leadership_changes_total
// counts every shard's terms, the tick counters and job series count each
// job once (a job is in one shard), scheduler_lease_ttl_seconds is every
// shard's. The Scheduler's own IsLeader, LeaseEpoch, StoreClockOffset,
// RenewalLatency and StoreDamaged are no longer exported; IsLeader is
// still kept, as 1 while any shard is led (leadCount), for the Go API.

// labelShard is the label of a shard's series: its number, from 0.
const labelShard = "shard"

// shardSeries registers, on the Registerer m was made with (none: nothing
// to do), each shard elector's lease series labelled with its shard and
// scheduler_shards_led, after unregistering m's unlabeled lease series.
//
// The shards' series are one unchecked collector (no descriptors): a
// registry remembers the label names of a name for its lifetime, even
// once its collector is unregistered, so it would refuse checked
// shard-labelled collectors of the names m registered unlabeled. Checked
// or not, the names are exported once: the unlabeled collectors are
// unregistered first, and a Metrics backs at most one sharded Scheduler.
func (m *Metrics) shardSeries(b *Balancer, shards int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sharded {
		return configErr("Metrics", "already export the shards of another scheduler")
	}
	m.sharded = true
	for i := range shards {
		// The standby time by the scheduler's clock, as the unlabeled one.
		b.Elector(i).cfg.Metrics.now = m.now
	}
	if m.reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.IsLeader, m.LeaseEpoch, m.StoreClockOffset, m.RenewalLatency, m.StoreDamaged, m.standby} {
		m.reg.Unregister(c)
	}
	var per unchecked
	for i := range shards {
		em := b.Elector(i).cfg.Metrics
		for _, c := range []prometheus.Collector{em.IsLeader, em.LeaseEpoch, em.StoreClockOffset, em.RenewalLatency, em.StoreDamaged, em.standby} {
			per = append(per, prometheus.WrapCollectorWith(prometheus.Labels{labelShard: strconv.Itoa(i)}, c))
		}
	}
	led := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scheduler_shards_led",
		Help: "Shards this replica leads with trust now (Config.Shards > 1).",
	}, func() float64 { return float64(len(b.Led())) })
	for _, c := range []prometheus.Collector{led, per} {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// unchecked collects its collectors' metrics and describes none.
type unchecked []prometheus.Collector

func (unchecked) Describe(chan<- *prometheus.Desc) {}

func (u unchecked) Collect(ch chan<- prometheus.Metric) {
	for _, c := range u {
		c.Collect(ch)
	}
}
