package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redact"
	otredis "github.com/onetick/onetick/redis"
)

// topology reads sentinel, cluster and the durability settings of the
// redis section.
func (p *parser) topology(sec map[string]entry, r *Redis) {
	const path = "backend.redis"
	if x, ok := sec["sentinel"]; ok && !isNull(x.val) {
		m, ok := p.mapping(x.val, x.line, path+".sentinel")
		if ok && m != nil {
			s := &Sentinel{}
			r.Sentinel = s
			f := p.fields(p.entries(m, path+".sentinel"), path+".sentinel", path+".sentinel", "primary", "addrs", "username", "password")
			if e, ok := f["primary"]; ok {
				s.Primary, _ = p.str(e, path+".sentinel.primary")
			}
			if s.Primary == "" {
				p.errorf(p.f.line(path+".sentinel.primary", x.line), path+".sentinel.primary", "is required: the name the sentinels monitor")
			}
			s.Addrs = p.addrs(f["addrs"], x.line, path+".sentinel.addrs")
			if e, ok := f["username"]; ok {
				s.Username, _ = p.str(e, path+".sentinel.username")
			}
			if e, ok := f["password"]; ok {
				s.Password, _ = p.str(e, path+".sentinel.password")
				if s.Password != "" {
					p.secrets = append(p.secrets, s.Password)
				}
			}
		}
	}
	if x, ok := sec["cluster"]; ok && !isNull(x.val) {
		m, ok := p.mapping(x.val, x.line, path+".cluster")
		if ok && m != nil {
			c := &Cluster{}
			r.Cluster = c
			f := p.fields(p.entries(m, path+".cluster"), path+".cluster", path+".cluster", "addrs")
			c.Addrs = p.addrs(f["addrs"], x.line, path+".cluster.addrs")
		}
	}
	if r.Sentinel != nil && r.Cluster != nil {
		p.errorf(sec["cluster"].line, path+".cluster", "give one of url, sentinel and cluster")
	}
	r.Durability = otredis.DurabilityAsync
	if x, ok := sec["durability"]; ok {
		if v, ok := p.str(x, path+".durability"); ok && v != "" {
			if v != otredis.DurabilityAsync && v != otredis.DurabilityReplicated {
				p.errorf(x.line, path+".durability", "must be async or replicated, got %q", short(v))
			}
			r.Durability = v
		}
	}
	if x, ok := sec["replicas"]; ok {
		v, _ := p.integer(x, path+".replicas", 1, 100)
		r.Replicas = int(v)
	}
	if x, ok := sec["replication_timeout"]; ok {
		if d, ok := p.dur(x, path+".replication_timeout"); ok {
			if d < 0 {
				p.errorf(x.line, path+".replication_timeout", "must not be negative, got %s", d)
			}
			r.ReplicationTimeout = d
		}
	}
	if r.Replicas == 0 {
		r.Replicas = 1
	}
	if r.ReplicationTimeout == 0 {
		r.ReplicationTimeout = Duration(100 * time.Millisecond)
	}
}

// addrs reads a non-empty list of host:port addresses.
func (p *parser) addrs(e entry, line int, path string) []string {
	if !e.ok() {
		p.errorf(line, path, "is required: a list of host:port")
		return nil
	}
	list, ok := p.strList(e, path)
	if !ok {
		return nil
	}
	if len(list) == 0 {
		p.errorf(e.line, path, "is empty: give at least one host:port")
	}
	for i, a := range list {
		field := fmt.Sprintf("%s[%d]", path, i)
		if strings.Contains(a, "@") {
			p.errorf(e.line, field, "want host:port, got %q: credentials go in username and password, not in the address", short(redact.URL(a)))
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			p.errorf(e.line, field, "want host:port, got %q", short(redact.URL(a)))
		}
	}
	return list
}

// DefaultStream is the stream of a job that names none: prefix:stream:job
// with one shard; with more, under the prefix of the job's shard
// (redis.ShardPrefix of onetick.ShardOf), so that on a Redis Cluster it
// shares the slot of the shard's keys (docs/shards.md, decision 3).
func DefaultStream(prefix, job string, shards int) string {
	if shards > 1 {
		prefix = otredis.ShardPrefix(prefix, onetick.ShardOf(job, shards), shards)
	}
	return prefix + ":stream:" + job
}

// checkSlots refuses job streams that a Redis Cluster would put in another
// hash slot than the keys of the job's shard (the prefix's, with one
// shard): one claim touches both atomically. A jobs file (base not nil)
// is checked against base's store and shards.
func (f *File) checkSlots(base *File) Errors {
	cfg := f
	if base != nil {
		cfg = base
	}
	r := cfg.Backend.Redis
	if r == nil || r.Cluster == nil {
		return nil
	}
	shards := max(cfg.Shards, 1)
	var errs Errors
	for i, j := range f.Jobs {
		prefix := r.Prefix
		if shards > 1 {
			prefix = otredis.ShardPrefix(r.Prefix, onetick.ShardOf(j.Name, shards), shards)
		}
		want := otredis.Slot(prefix)
		if j.Stream == "" || otredis.Slot(j.Stream) == want {
			continue
		}
		msg := fmt.Sprintf("%q lands in cluster hash slot %d, the prefix %q in %d: in a Redis Cluster every key of onetick must share the prefix's hash tag; name it like %s:%s, or leave stream out",
			j.Stream, otredis.Slot(j.Stream), r.Prefix, want, r.Prefix, strings.Trim(j.Stream, "{}"))
		if shards > 1 {
			msg = fmt.Sprintf("%q lands in cluster hash slot %d, and job %s is in shard %d of %d, whose keys are in slot %d: on a sharded Redis Cluster a job's stream must share its shard's hash tag; name it like %s:%s, or leave stream out",
				j.Stream, otredis.Slot(j.Stream), j.Name, onetick.ShardOf(j.Name, shards), shards, want, prefix, strings.Trim(stripTag(j.Stream), ":"))
		}
		errs = append(errs, &Error{File: f.Path, Line: f.jobLine(i, "stream"), Field: label(i, j.Name) + ".stream", Msg: msg})
	}
	return errs
}

// stripTag removes a key's hash tag ({...}), keeping the rest.
func stripTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j >= 0 {
			return key[:i] + key[i+2+j:]
		}
	}
	return key
}
