package config

import (
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick"
)

// Metrics chooses the jobs that get their own metric series; the fleet
// totals count every job regardless. After Parse every field holds its
// effective value.
type Metrics struct {
	// PerJob is auto (the default: every job while there are at most
	// PerJobLimit, beyond that the listed ones), all, listed or none.
	PerJob string `yaml:"per_job"`
	// PerJobLimit applies to auto. Default 1000.
	PerJobLimit int `yaml:"per_job_limit"`
	// Jobs have their own series with auto (also beyond the limit) and
	// listed.
	Jobs []string `yaml:"jobs"`
}

// JobMetrics returns the choice of per-job series for onetick.Config.
func (f *File) JobMetrics() onetick.JobMetrics {
	return onetick.JobMetrics{Mode: onetick.JobMetricsMode(f.Metrics.PerJob), Limit: f.Metrics.PerJobLimit,
		Jobs: append([]string(nil), f.Metrics.Jobs...)}
}

// metricsKeys are the keys of the metrics section.
var metricsKeys = []string{"per_job", "per_job_limit", "jobs"}

// metrics walks the metrics section; the jobs must have been read.
func (p *parser) metrics(e entry) {
	const path = "metrics"
	m := &p.f.Metrics
	defer func() {
		if m.PerJob == "" {
			m.PerJob = string(onetick.JobMetricsAuto)
		}
		if m.PerJobLimit == 0 {
			m.PerJobLimit = onetick.DefaultJobMetricsLimit
		}
	}()
	if !e.ok() {
		return
	}
	mp, ok := p.mapping(e.val, e.line, path)
	if mp == nil || !ok {
		return
	}
	sec := p.fields(p.entries(mp, path), path, path, metricsKeys...)
	if e, ok := sec["per_job"]; ok {
		if v, ok := p.str(e, path+".per_job"); ok {
			switch onetick.JobMetricsMode(v) {
			case "", onetick.JobMetricsAuto, onetick.JobMetricsAll, onetick.JobMetricsListed, onetick.JobMetricsNone:
				m.PerJob = v
			default:
				p.errorf(e.line, path+".per_job", "must be %s, %s, %s or %s, got %q", onetick.JobMetricsAuto,
					onetick.JobMetricsAll, onetick.JobMetricsListed, onetick.JobMetricsNone, short(v))
			}
		}
	}
	mode := onetick.JobMetricsMode(m.PerJob)
	if e, ok := sec["per_job_limit"]; ok {
		if v, ok := p.integer(e, path+".per_job_limit", 0, math.MaxInt32); ok {
			m.PerJobLimit = int(v)
			if v != 0 && mode != "" && mode != onetick.JobMetricsAuto {
				p.errorf(e.line, path+".per_job_limit", "has no effect with per_job: %s (only auto has a limit)", mode)
			}
		}
	}
	if e, ok := sec["jobs"]; ok {
		p.metricsJobs(e, mode)
	}
}

// metricsJobs reads metrics.jobs: names of configured jobs, each once.
func (p *parser) metricsJobs(e entry, mode onetick.JobMetricsMode) {
	const path = "metrics.jobs"
	if isNull(e.val) {
		return
	}
	seq := deref(e.val)
	if seq.Kind != yaml.SequenceNode {
		p.errorf(e.line, path, "must be a list of job names, got %s", p.kindText(seq))
		return
	}
	if len(seq.Content) > 0 && (mode == onetick.JobMetricsAll || mode == onetick.JobMetricsNone) {
		p.errorf(e.line, path, "has no effect with per_job: %s (list jobs with per_job: auto or listed)", mode)
		return
	}
	configured := make(map[string]bool, len(p.f.Jobs))
	for _, j := range p.f.Jobs {
		configured[j.Name] = true
	}
	first := map[string]int{}
	for i, item := range seq.Content {
		if !p.spend(1, item.Line) {
			return
		}
		field := fmt.Sprintf("%s[%d]", path, i)
		d := deref(item)
		if d == nil || d.Kind != yaml.ScalarNode || isNull(d) {
			p.errorf(item.Line, field, "must be a job's name")
			continue
		}
		name, _ := p.str(entry{name: field, line: item.Line, val: item}, field)
		switch line, dup := first[name]; {
		case dup:
			p.errorf(item.Line, field, "lists %q again (first on line %d)", short(name), line)
		case !configured[name]:
			p.errorf(item.Line, field, "names no job of this file: %q", short(name))
		default:
			first[name] = item.Line
			p.f.Metrics.Jobs = append(p.f.Metrics.Jobs, name)
		}
	}
}
