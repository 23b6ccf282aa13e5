package config

import (
	"strings"
	"time"
)

// Worker configures the worker half of each replica: it runs the jobs that
// have a run block.
type Worker struct {
	Group           string   `yaml:"group"`
	Concurrency     int      `yaml:"concurrency"`
	TakeoverIdle    Duration `yaml:"takeover_idle"`
	Heartbeat       Duration `yaml:"heartbeat"`
	DoneRetention   Duration `yaml:"done_retention"`
	MaxDeliveries   int      `yaml:"max_deliveries"`
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// Allow is what jobs defined at run time may run (allow_commands,
	// allow_http_hosts); empty: no run blocks at run time.
	Allow Allow `yaml:",inline"`
}

// Roles of a replica.
const (
	RoleBoth      = "both"
	RoleScheduler = "scheduler"
	RoleWorker    = "worker"
)

// Worker defaults (applied by Parse).
const (
	DefaultWorkerGroup     = "onetick"
	DefaultConcurrency     = 10
	DefaultTakeoverIdle    = 30 * time.Second
	DefaultHeartbeat       = time.Second
	DefaultDoneRetention   = 24 * time.Hour
	DefaultMaxDeliveries   = 10
	DefaultShutdownTimeout = 8 * time.Second
)

func (p *parser) role(e entry) {
	p.f.Role = RoleBoth
	if !e.ok() || isNull(e.val) {
		return
	}
	v, ok := p.str(e, "role")
	if !ok {
		return
	}
	switch v {
	case RoleBoth, RoleScheduler, RoleWorker:
		p.f.Role = v
	default:
		p.errorf(e.line, "role", "must be both, scheduler or worker, got %q", short(v))
	}
}

// workerKeys are the keys of the worker section.
var workerKeys = []string{"group", "concurrency", "takeover_idle", "heartbeat",
	"done_retention", "max_deliveries", "shutdown_timeout", "allow_commands", "allow_http_hosts"}

func (p *parser) worker(e entry) {
	w := &p.f.Worker
	*w = Worker{Group: DefaultWorkerGroup, Concurrency: DefaultConcurrency, TakeoverIdle: Duration(DefaultTakeoverIdle),
		Heartbeat: Duration(DefaultHeartbeat), DoneRetention: Duration(DefaultDoneRetention),
		MaxDeliveries: DefaultMaxDeliveries, ShutdownTimeout: Duration(DefaultShutdownTimeout)}
	heartbeatSet := false
	if !e.ok() {
		return
	}
	m, ok := p.mapping(e.val, e.line, "worker")
	if m == nil || !ok {
		return
	}
	sec := p.fields(p.entries(m, "worker"), "worker", "worker", workerKeys...)
	for _, l := range []struct {
		key string
		dst *[]string
	}{{"allow_commands", &w.Allow.Commands}, {"allow_http_hosts", &w.Allow.HTTPHosts}} {
		if x, ok := sec[l.key]; ok {
			*l.dst, _ = p.strList(x, "worker."+l.key)
		}
	}
	for _, pr := range checkAllowEntries(w.Allow) {
		p.errorf(p.f.line(pr[0], e.line), pr[0], "%s", pr[1])
	}
	if x, ok := sec["group"]; ok {
		if v, ok := p.str(x, "worker.group"); ok && v != "" {
			if strings.ContainsAny(v, " \t\n") {
				p.errorf(x.line, "worker.group", "must not contain spaces")
			}
			w.Group = v
		}
	}
	ints := []struct {
		key string
		dst *int
		hi  int64
	}{{"concurrency", &w.Concurrency, 10000}, {"max_deliveries", &w.MaxDeliveries, 1000}}
	for _, f := range ints {
		if x, ok := sec[f.key]; ok {
			if v, ok := p.integer(x, "worker."+f.key, 1, f.hi); ok && v != 0 {
				*f.dst = int(v)
			}
		}
	}
	durs := []struct {
		key string
		dst *Duration
	}{{"takeover_idle", &w.TakeoverIdle}, {"heartbeat", &w.Heartbeat}, {"done_retention", &w.DoneRetention},
		{"shutdown_timeout", &w.ShutdownTimeout}}
	for _, f := range durs {
		if x, ok := sec[f.key]; ok {
			if v, ok := p.dur(x, "worker."+f.key); ok {
				if v < 0 {
					p.errorf(x.line, "worker."+f.key, "must not be negative, got %s", v)
				} else if v != 0 {
					*f.dst = v
					heartbeatSet = heartbeatSet || f.key == "heartbeat"
				}
			}
		}
	}
	line := e.line
	if !heartbeatSet {
		w.Heartbeat = min(Duration(DefaultHeartbeat), w.TakeoverIdle/3)
	}
	switch {
	case w.TakeoverIdle.D() < 100*time.Millisecond:
		p.errorf(p.f.line("worker.takeover_idle", line), "worker.takeover_idle", "must be at least 100ms, got %s", w.TakeoverIdle)
	case w.Heartbeat > w.TakeoverIdle/3:
		p.errorf(p.f.line("worker.heartbeat", line), "worker.heartbeat", "%s must be at most a third of takeover_idle (%s): a live consumer must heartbeat several times before its ticks may be taken over", w.Heartbeat, w.TakeoverIdle)
	case w.DoneRetention < w.TakeoverIdle:
		p.errorf(p.f.line("worker.done_retention", line), "worker.done_retention", "%s must be at least takeover_idle (%s): a done record must outlive every redelivery", w.DoneRetention, w.TakeoverIdle)
	}
}
