package storekit_test

import (
	"testing"

	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

func TestToken(t *testing.T) {
	d := &worker.Delivery{Stream: "onetick:ticks:a", ID: "1700000000000-7"}
	tok := storekit.Token(d)
	if tok != "onetick:ticks:a\n1700000000000-7" {
		t.Fatalf("Token = %q", tok)
	}
	if s, id := storekit.SplitToken(tok); s != d.Stream || id != d.ID {
		t.Fatalf("SplitToken(%q) = %q, %q", tok, s, id)
	}
	if got := storekit.RunMarker("backup"); got != "run:backup" {
		t.Fatalf("RunMarker = %q", got)
	}
}

func TestDeliveryLimitError(t *testing.T) {
	const want = "delivery limit: delivered 4 times without a result (max_deliveries 3)"
	if got := storekit.DeliveryLimitError(4, 3); got != want {
		t.Fatalf("DeliveryLimitError(4, 3) = %q, want %q", got, want)
	}
}

func TestScreen(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int
		count int
		done  bool
		want  worker.Admission
	}{
		{"fresh", 3, 1, false, 0},
		{"no limit", 0, 99, false, 0},
		{"at the limit", 3, 3, false, 0},
		{"past the limit", 3, 4, false, worker.DeadDeliveries},
		{"done", 3, 1, true, worker.SkipDone},
		{"done before the limit", 3, 4, true, worker.SkipDone},
	} {
		got := storekit.Screen(worker.Start{MaxDeliveries: c.limit}, c.count, c.done)
		if got != c.want {
			t.Errorf("%s: Screen = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRetriedDone(t *testing.T) {
	d := &worker.Delivery{Tick: "t1", ID: "5-1"}
	rec := worker.DoneRecord{Tick: "t1", Entry: "5-1", Consumer: "w1"}
	for _, c := range []struct {
		name     string
		kind     worker.FinishKind
		consumer string
		rec      worker.DoneRecord
		ok       bool
		want     bool
	}{
		{"own record", worker.FinishDone, "w1", rec, true, true},
		{"no record", worker.FinishDone, "w1", worker.DoneRecord{}, false, false},
		{"another consumer's", worker.FinishDone, "w2", rec, true, false},
		{"another entry's", worker.FinishDone, "w1", worker.DoneRecord{Tick: "t1", Entry: "6-2", Consumer: "w1"}, true, false},
		{"not a done", worker.FinishRetry, "w1", rec, true, false},
	} {
		if got := storekit.RetriedDone(worker.Finish{D: d, Kind: c.kind}, c.consumer, c.rec, c.ok); got != c.want {
			t.Errorf("%s: RetriedDone = %v, want %v", c.name, got, c.want)
		}
	}
}
