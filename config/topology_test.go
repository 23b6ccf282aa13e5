package config

import "testing"

var topologyErrCases = []errCase{
	{name: "url and sentinel", yaml: "backend:\n  redis:\n    url: redis://h:6379\n    sentinel: {primary: m, addrs: ['h:26379']}\n",
		want: []want{{3, "backend.redis.url", "give one of url, sentinel and cluster"}}},
	{name: "sentinel without primary", yaml: "backend:\n  redis:\n    sentinel: {addrs: ['h:26379']}\n",
		want: []want{{3, "backend.redis.sentinel.primary", "is required"}}},
	{name: "sentinel bad address", yaml: "backend:\n  redis:\n    sentinel:\n      primary: m\n      addrs: [h]\n",
		want: []want{{5, "backend.redis.sentinel.addrs[0]", "want host:port"}}},
	{name: "cluster without addrs", yaml: "backend:\n  redis:\n    cluster: {}\n",
		want: []want{{3, "backend.redis.cluster.addrs", "is required"}}},
	{name: "sentinel and cluster", yaml: "backend:\n  redis:\n    sentinel: {primary: m, addrs: ['h:1']}\n    cluster: {addrs: ['h:2']}\n",
		want: []want{{4, "backend.redis.cluster", "give one of url, sentinel and cluster"}}},
	{name: "durability", yaml: "backend:\n  redis:\n    url: redis://h:6379\n    durability: sync\n",
		want: []want{{4, "backend.redis.durability", "must be async or replicated"}}},
	{name: "cluster stream in another slot", yaml: "backend:\n  redis:\n    cluster: {addrs: ['h:7000']}\njobs:\n  - name: a\n    schedule: '@daily'\n    stream: billing:jobs\n",
		want: []want{{7, "jobs[0] (a).stream", `"billing:jobs" lands in cluster hash slot 11675, the prefix "{onetick}" in 4617: in a Redis Cluster every key of onetick must share the prefix's hash tag; name it like {onetick}:billing:jobs`}}},
	{name: "sentinel password not in messages", yaml: "backend:\n  redis:\n    sentinel: {primary: m, addrs: ['h:1'], password: p4ssw0rd, username: [x]}\n",
		secret: "p4ssw0rd", want: []want{{3, "backend.redis.sentinel.username", "must be a string"}}},
}

func TestTopologyErrors(t *testing.T) { checkCases(t, topologyErrCases) }

func TestTopologyParse(t *testing.T) {
	f := mustParse(t, `backend:
  redis:
    cluster: {addrs: ['127.0.0.1:7000', '127.0.0.1:7001']}
    durability: replicated
    replicas: 2
jobs:
  - {name: a, schedule: '@daily'}
  - {name: b, schedule: '@daily', stream: '{onetick}:b'}
`, noEnv)
	r := f.Backend.Redis
	if r.Topology() != "cluster" || r.Prefix != "{onetick}" || f.Jobs[0].Stream != "{onetick}:stream:a" || r.Replicas != 2 || r.Durability != "replicated" {
		t.Fatalf("redis %+v, stream %q", r, f.Jobs[0].Stream)
	}
	if o := f.BackendOptions(); o.Prefix != "{onetick}" || o.Durability != "replicated" || o.Replicas != 2 {
		t.Fatalf("backend options %+v", o)
	}
	s := mustParse(t, "backend:\n  redis:\n    sentinel: {primary: mymaster, addrs: ['127.0.0.1:26379']}\n", noEnv)
	if s.Backend.Redis.Topology() != "sentinel" || s.Backend.Redis.Prefix != "onetick" || s.MaskedRedisURL() != "sentinel mymaster via 127.0.0.1:26379" {
		t.Fatalf("sentinel %+v %q", s.Backend.Redis, s.MaskedRedisURL())
	}
}
