package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick/internal/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A started server answers on its endpoint, and two servers have ports
// and data of their own.
func TestStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := etcdtest.Start(t), etcdtest.Start(t)
	if a.Port == b.Port || a.PeerPort == b.PeerPort {
		t.Fatalf("two servers share a port: %+v %+v", a, b)
	}
	ca, cb := a.Client(t), b.Client(t)
	if _, err := ca.Put(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	resp, err := cb.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the second server sees %v, %v; want nothing", resp, err)
	}
	resp, err = ca.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("get: %v, %v", resp, err)
	}
}
