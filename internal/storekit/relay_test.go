package storekit

import (
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

func TestRelayRefusedByAStoreThatDoesNotHandIt(t *testing.T) {
	river := &onetick.Relay{Kind: onetick.RelayRiver}
	tk := onetick.Tick{Job: "report", Slot: 1000, Relay: river}
	for _, relays := range []string{"", onetick.RelayAsynq} {
		d, err := Decide(tk, "tok", 5000, View{Relays: relays})
		if err != nil || d.Outcome != onetick.Broken || d.Append || d.Record != "" || d.Damage == nil {
			t.Fatalf("relays %q: decision %+v, %v; want Broken, nothing written", relays, d, err)
		}
		if d.Damage.Job != "report" || !strings.Contains(d.Damage.Reason, "job report relays its ticks to river") {
			t.Fatalf("relays %q: damage %+v does not name the job and relay", relays, d.Damage)
		}
	}
	d, _ := Decide(tk, "tok", 5000, View{Relays: onetick.RelayRiver})
	if d.Outcome != onetick.Claimed || !d.Append {
		t.Fatalf("the relay's own store: %+v, want Claimed", d)
	}
	d, _ = Decide(onetick.Tick{Job: "plain", Slot: 1000}, "tok", 5000, View{})
	if d.Outcome != onetick.Claimed {
		t.Fatalf("a tick without a relay: %+v, want Claimed", d)
	}
	// A duplicate stays a duplicate: the refusal holds only what would be written.
	d, _ = Decide(tk, "tok", 5000, View{Seen: true, Record: "tok"})
	if d.Outcome != onetick.Claimed || d.Record != "" {
		t.Fatalf("a retry of the term's own claim: %+v", d)
	}
}

func TestManualRelayRefused(t *testing.T) {
	ticks := []onetick.Tick{{Job: "report", Key: "k", Relay: &onetick.Relay{Kind: onetick.RelayRiver}}}
	m, err := Manual(ticks, onetick.Actor{Who: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Decide(1, 5000, false, nil); d.Outcome != onetick.Broken || d.Damage == nil || d.Damage.Job != "report" {
		t.Fatalf("no relay store: %+v, want Broken naming the job", d)
	}
	m.Relays = onetick.RelayRiver
	if d := m.Decide(1, 5000, false, nil); d.Outcome != onetick.Claimed || !d.Append {
		t.Fatalf("the relay's store: %+v, want Claimed", d)
	}
}

func TestClaimNotesSayRelayed(t *testing.T) {
	tk := onetick.Tick{Job: "report", Slot: 1000, Relay: &onetick.Relay{Kind: onetick.RelayRiver}}
	d, _ := Decide(tk, "tok", 5000, View{Relays: onetick.RelayRiver})
	n, ok := ClaimNotes(tk, tk.ID(), d, onetick.Lease{Holder: "a", Epoch: 1}, time.Unix(5, 0))
	if !ok || n.Event.What != onetick.EventEnqueued || n.Event.Detail != "relayed to river" {
		t.Fatalf("note %+v", n.Event)
	}
}
