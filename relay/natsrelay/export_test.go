package natsrelay

import "github.com/prometheus/client_golang/prometheus"

func PublishedCounter(m *Metrics) prometheus.Counter  { return m.published }
func DuplicatesCounter(m *Metrics) prometheus.Counter { return m.duplicates }
func DroppedCounter(m *Metrics) prometheus.Counter    { return m.dropped }
