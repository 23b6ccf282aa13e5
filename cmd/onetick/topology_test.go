package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/internal/redistest"
)

// TestRunOnSentinelAndCluster: a replica configured for a Sentinel
// topology or a Redis Cluster, every server behind a password, leads and
// fires, and status and /readyz say which topology and which primary they
// see; no password shows on any path (validate, status, /readyz, /status,
// the log).
func TestRunOnSentinelAndCluster(t *testing.T) {
	const dataPw, sentinelPw, clusterPw = "data-s3cret-pw", "sentinel-s3cret-pw", "cluster-s3cret-pw"
	topo := redistest.StartSentinel(t, redistest.SentinelOptions{Password: dataPw, SentinelPassword: sentinelPw})
	cl := redistest.StartCluster(t, redistest.ClusterOptions{Password: clusterPw})
	sentinelYAML := fmt.Sprintf(`backend:
  redis:
    sentinel:
      primary: %s
      addrs: [%s]
      password: %s
    password: %s
    durability: replicated
jobs:
  - {name: hb, schedule: "@every 1s"}
`, topo.MasterName(), strings.Join(topo.SentinelAddrs(), ", "), sentinelPw, dataPw)
	clusterYAML := fmt.Sprintf(`backend:
  redis:
    cluster:
      addrs: [%s]
    password: %s
jobs:
  - {name: hb, schedule: "@every 1s"}
`, strings.Join(cl.Addrs(), ", "), clusterPw)
	primary, err := topo.PrimaryAddr(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml, stream, want string
		client                   func() goredis.UniversalClient
	}{
		{"sentinel", sentinelYAML, "onetick:stream:hb", "primary " + primary + ", durability replicated",
			func() goredis.UniversalClient { return goredis.NewFailoverClient(topo.FailoverOptions()) }},
		{"cluster", clusterYAML, "{onetick}:stream:hb", "redis cluster, primary 127.0.0.1:",
			func() goredis.UniversalClient {
				return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs(), Password: cl.Password()})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, tc.name+".yaml", tc.yaml)
			out, stderr, code := runCmd(t, nil, "validate", "--config", cfg)
			if code != 0 {
				t.Fatalf("validate: %d %s %s", code, out, stderr)
			}
			noSecret(t, "validate", out+stderr, dataPw, sentinelPw, clusterPw)
			p := startProc(t, "r0", "--config", cfg)
			addr := <-p.addr
			p.waitEvent("became leader", 0, 15*time.Second)
			c := tc.client()
			defer c.Close()
			for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if n, _ := c.XLen(context.Background(), tc.stream).Result(); n >= 2 {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("no ticks in %s", tc.stream)
				}
			}
			out, stderr, code = runCmd(t, nil, "status", "--config", cfg)
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("status: %d\n%s\nwant %q", code, out, tc.want)
			}
			noSecret(t, "status", out+stderr, dataPw, sentinelPw, clusterPw)
			code, body := getURL(t, "http://"+addr+"/readyz")
			if code != 200 || !strings.Contains(body, tc.want) {
				t.Fatalf("/readyz %d %q, want %q", code, body, tc.want)
			}
			noSecret(t, "/readyz", body, dataPw, sentinelPw, clusterPw)
			_, body = getURL(t, "http://"+addr+"/status")
			noSecret(t, "/status", body, dataPw, sentinelPw, clusterPw)
			p.mu.Lock()
			for _, ev := range p.events {
				noSecret(t, "the log", ev.Raw, dataPw, sentinelPw, clusterPw)
			}
			p.mu.Unlock()
		})
	}
}

func getURL(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
