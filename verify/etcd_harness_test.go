//go:build verify

package verify

// Fleets on etcd (backend: etcd): a three-member cluster of real etcd
// processes (internal/etcdtest), each replica's endpoints from its
// environment so that one replica can go through proxies, the streams
// read back through the etcd Backend.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	otetcd "github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/etcdtest"
)

// etcdEnv is the variable carrying a replica's i-th endpoint (config:
// endpoints: [${ONETICK_VERIFY_ETCD_0:-...}, ...]).
func etcdEnv(i int) string { return fmt.Sprintf("ONETICK_VERIFY_ETCD_%d", i) }

// etcdConfigYAML is configYAML (same lease, jobs and stream names) on the
// etcd members at endpoints, under keyPrefix.
func etcdConfigYAML(endpoints []string, keyPrefix string) string {
	refs := make([]string, len(endpoints))
	for i, e := range endpoints {
		refs[i] = "${" + etcdEnv(i) + ":-" + e + "}"
	}
	return onBackend(configYAML, "backend:\n  etcd:\n    endpoints: ["+strings.Join(refs, ", ")+"]\n    prefix: "+keyPrefix+"\n")
}

// EtcdFleet is a fleet on an etcd cluster.
type EtcdFleet struct {
	*Fleet
	Cluster *etcdtest.Cluster
}

// NewEtcdFleet starts a three-member etcd cluster for scenario and
// prepares a fleet on it; the members are killed at the end of the test,
// after the replicas.
func NewEtcdFleet(t *testing.T, scenario string) *EtcdFleet {
	t.Helper()
	return newEtcdFleet(t, scenario, etcdtest.StartCluster(t, 3))
}

func newEtcdFleet(t *testing.T, scenario string, c *etcdtest.Cluster) *EtcdFleet {
	t.Helper()
	keyPrefix := etcdtest.Prefix()
	cfg := filepath.Join(t.TempDir(), "onetick.yaml")
	if err := os.WriteFile(cfg, []byte(etcdConfigYAML(c.Endpoints(), keyPrefix)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := otetcd.Open(ctx, otetcd.Config{Endpoints: c.Endpoints()}, otetcd.Options{Prefix: keyPrefix})
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{t: t, Scenario: scenario, cfgPath: cfg, bus: newBus(), etcd: b, final: map[*Replica]Metrics{}}
	// Registered after the cluster's cleanups: runs before them.
	t.Cleanup(f.close)
	return &EtcdFleet{Fleet: f, Cluster: c}
}

// StartOn starts a replica whose i-th endpoint is urls[i] (proxies).
func (e *EtcdFleet) StartOn(name string, urls []string) *Replica {
	e.t.Helper()
	var opts []StartOpt
	for i, u := range urls {
		opts = append(opts, WithEnv(etcdEnv(i)+"="+u))
	}
	return e.Fleet.Start(name, opts...)
}

// StartVia starts a replica whose every endpoint is url (a proxy).
func (e *EtcdFleet) StartVia(name, url string) *Replica {
	e.t.Helper()
	var opts []StartOpt
	for i := range e.Cluster.Members {
		opts = append(opts, WithEnv(etcdEnv(i)+"="+url))
	}
	return e.Fleet.Start(name, opts...)
}

// readEtcdStream reads a stream through the etcd Backend, retrying for a
// while (a request to a member just killed fails over to another).
func (f *Fleet) readEtcdStream(stream string) ([]onetick.TickRecord, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		recs, err := f.etcd.ReadStream(ctx, stream)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return recs, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
