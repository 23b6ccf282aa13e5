package config

import (
	"strings"
	"testing"
)

var etcdErrCases = []errCase{
	{name: "etcd without endpoints", yaml: "backend:\n  etcd: {prefix: p/}\n",
		want: []want{{2, "backend.etcd.endpoints", "is required"}}},
	{name: "etcd endpoint not a URL", yaml: "backend:\n  etcd:\n    endpoints: [e1:2379]\n",
		want: []want{{3, "backend.etcd.endpoints", "want http://host:port"}}},
	{name: "etcd endpoint with credentials", yaml: "backend:\n  etcd:\n    endpoints: ['http://u:hunter2@e1:2379']\n",
		secret: "hunter2", want: []want{{3, "backend.etcd.endpoints", "without credentials"}}},
	{name: "etcd password without user", yaml: "backend:\n  etcd:\n    endpoints: [http://e1:2379]\n    password: s3cr3tpw\n",
		secret: "s3cr3tpw", want: []want{{4, "backend.etcd.username", "is required with password"}}},
	{name: "etcd mixed schemes", yaml: "backend:\n  etcd:\n    endpoints: [http://e1:2379, https://e2:2379]\n",
		want: []want{{3, "backend.etcd.endpoints", "mixes http:// and https://"}}},
	{name: "etcd tls file without tls", yaml: "backend:\n  etcd:\n    endpoints: [http://e1:2379]\n    tls: {ca_file: ca.pem}\n",
		want: []want{{4, "backend.etcd.tls.ca_file", "has no effect"}}},
	{name: "etcd max txn ops", yaml: "backend:\n  etcd:\n    endpoints: [http://e1:2379]\n    max_txn_ops: 2\n",
		want: []want{{4, "backend.etcd.max_txn_ops", ""}}},
	{name: "etcd unknown key", yaml: "backend:\n  etcd:\n    endpoints: [http://e1:2379]\n    lease: 3\n",
		want: []want{{4, "backend.etcd.lease", "unknown"}}},
	{name: "etcd and postgres", yaml: "backend:\n  etcd: {endpoints: ['http://e:1']}\n  postgres: {url: 'postgres://u@h/db'}\n",
		want: []want{{1, "backend", "give one of redis, postgres, etcd, file and memory"}}},
}

func TestEtcdErrors(t *testing.T) { checkCases(t, etcdErrCases) }

func TestEtcdParse(t *testing.T) {
	f := mustParse(t, "backend:\n  etcd:\n    endpoints: [https://e1:2379, https://e2:2379]\n    username: onetick\n    password: ${ETCD_PASSWORD}\n",
		envMap(map[string]string{"ETCD_PASSWORD": "pw-9d2"}))
	c := f.Backend.Etcd
	if c == nil || c.Prefix != DefaultEtcdPrefix || !c.TLS.Enabled || !f.Shared() || c.MaxTxnOps != 128 {
		t.Fatalf("etcd %+v", c)
	}
	if m := f.MaskedStore(); m != "etcd https://e1:2379,https://e2:2379 prefix onetick/" || strings.Contains(m, "pw-9d2") {
		t.Fatalf("masked %q", m)
	}
	cfg, opts, ok, err := f.EtcdConfig()
	if err != nil || !ok || cfg.TLS == nil || cfg.TLS.ServerName != "e1" || cfg.Password != "pw-9d2" || opts.Prefix != "onetick/" {
		t.Fatalf("config %+v %+v %v %v", cfg, opts, ok, err)
	}
}
