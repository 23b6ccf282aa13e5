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

// A three-member cluster elects a leader; with the leader killed the
// other two elect another and keep serving; the killed member restarts
// on its data and catches up with what was written meanwhile.
func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.StartCluster(t, 3)
	cl := c.Client(t)
	first, err := c.AwaitLeader(ctx, cl, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(first)
	if c.Members[first].Alive() {
		t.Fatal("a killed member reports itself alive")
	}
	second, err := c.AwaitLeader(ctx, cl, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("the killed member %d still leads", first)
	}
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(first); err != nil {
		t.Fatal(err)
	}
	one := c.Members[first].Client(t)
	resp, err := one.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("the restarted member reads %v, %v; want k=v", resp, err)
	}
}

// A partitioned member (peer traffic cut both ways) leaves the others a
// quorum that elects a leader and serves writes, while a linearizable
// read on it fails; healed, it catches up.
func TestPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.StartPartitionableCluster(t, 3)
	cl := c.Client(t)
	old, err := c.AwaitLeader(ctx, cl, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Partition(old)
	other := c.Members[(old+1)%3].Client(t)
	var done bool
	for deadline := time.Now().Add(30 * time.Second); !done && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := other.Put(pctx, "k", "v")
		pcancel()
		done = err == nil
	}
	if !done {
		t.Fatal("the majority side accepts no write with the leader partitioned")
	}
	alone := c.Members[old].Client(t)
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = alone.Get(rctx, "k")
	rcancel()
	if err == nil {
		t.Fatal("a linearizable read on the partitioned member succeeded")
	}
	c.Heal(old)
	for deadline := time.Now().Add(30 * time.Second); ; {
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := alone.Get(gctx, "k")
		gcancel()
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the healed member reads %v, %v; want k=v", resp, err)
		}
	}
}
