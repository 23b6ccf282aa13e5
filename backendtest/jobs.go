package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
)

var jobStoreTests = []struct {
	name string
	fn   func(t *testing.T, h Harness, b onetick.Backend)
}{
	{"JobStoreApply", testJobStoreApply},
	{"JobStoreAtRunTime", testJobStoreAtRunTime},
}

func jobStore(t *testing.T, b onetick.Backend) onetick.JobStore {
	js, ok := b.(onetick.JobStore)
	if !ok {
		t.Skip("this backend keeps no jobs defined at run time")
	}
	return js
}

func def(schedule string) json.RawMessage {
	d, _ := json.Marshal(map[string]string{"schedule": schedule})
	return d
}

func names(d []string) []string {
	if d == nil {
		return []string{}
	}
	return d
}

// testJobStoreApply: apply makes a set exactly the given jobs, in one
// step; a dry run writes nothing; a name of another set is refused with
// nothing written; remove removes.
func testJobStoreApply(t *testing.T, _ Harness, b onetick.Backend) {
	js := jobStore(t, b)
	ctx := ctxT(t)
	d, err := js.ApplyJobs(ctx, "s1", []onetick.StoredJob{{Name: "a", Def: def("@hourly")}, {Name: "b", Def: def("@daily")}}, false)
	if err != nil || !slices.Equal(names(d.Added), []string{"a", "b"}) || d.Version == 0 {
		t.Fatalf("first apply: %+v, %v", d, err)
	}
	jobs, v1, err := js.StoredJobs(ctx)
	if err != nil || len(jobs) != 2 || v1 != d.Version || jobs[0].Set != "s1" || jobs[0].Since.IsZero() {
		t.Fatalf("stored %+v v%d, %v", jobs, v1, err)
	}
	sinceA := jobs[0].Since
	next := []onetick.StoredJob{{Name: "a", Def: def("@every 1m")}, {Name: "c", Def: def("@daily")}}
	d, err = js.ApplyJobs(ctx, "s1", next, true)
	if err != nil || !d.DryRun || !slices.Equal(names(d.Changed), []string{"a"}) || !slices.Equal(names(d.Added), []string{"c"}) ||
		!slices.Equal(names(d.Removed), []string{"b"}) {
		t.Fatalf("dry run: %+v, %v", d, err)
	}
	if jobs2, v2, _ := js.StoredJobs(ctx); v2 != v1 || len(jobs2) != 2 || string(jobs2[0].Def) != string(def("@hourly")) {
		t.Fatalf("the dry run wrote: %+v v%d", jobs2, v2)
	}
	for storeSlot(t, b) <= onetick.SlotOf(sinceA) {
	}
	if d, err = js.ApplyJobs(ctx, "s1", next, false); err != nil || d.Version <= v1 {
		t.Fatalf("apply: %+v, %v", d, err)
	}
	jobs, _, _ = js.StoredJobs(ctx)
	if len(jobs) != 2 || jobs[0].Name != "a" || !jobs[0].Since.After(sinceA) || jobs[1].Name != "c" {
		t.Fatalf("after apply: %+v", jobs)
	}
	// Unchanged definitions keep their Since.
	if d, err = js.ApplyJobs(ctx, "s1", next, false); err != nil || !slices.Equal(names(d.Unchanged), []string{"a", "c"}) {
		t.Fatalf("apply again: %+v, %v", d, err)
	}
	// A name of another set is refused, nothing written.
	v3, _ := js.JobsVersion(ctx)
	_, err = js.ApplyJobs(ctx, "s2", []onetick.StoredJob{{Name: "x", Def: def("@daily")}, {Name: "a", Def: def("@daily")}}, false)
	var in *onetick.InputError
	if !errors.As(err, &in) {
		t.Fatalf("apply of s1's job to s2: %v, want an InputError", err)
	}
	if jobs, v4, _ := js.StoredJobs(ctx); v4 != v3 || len(jobs) != 2 {
		t.Fatalf("a refused apply wrote: %+v v%d", jobs, v4)
	}
	d, err = js.RemoveJobs(ctx, "s1", []string{"c", "nope"})
	if err != nil || !slices.Equal(names(d.Removed), []string{"c"}) {
		t.Fatalf("remove: %+v, %v", d, err)
	}
	if jobs, _, _ := js.StoredJobs(ctx); len(jobs) != 1 || jobs[0].Name != "a" {
		t.Fatalf("after remove: %+v", jobs)
	}
}

// storeSource is a JobSource over a JobStore whose definitions are
// {"schedule": "..."}.
type storeSource struct {
	js     onetick.JobStore
	stream string
}

func (s storeSource) Version(ctx context.Context) (int64, error) { return s.js.JobsVersion(ctx) }

func (s storeSource) Jobs(ctx context.Context) ([]onetick.Job, int64, error) {
	stored, v, err := s.js.StoredJobs(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []onetick.Job
	for _, j := range stored {
		var d struct{ Schedule string }
		if json.Unmarshal(j.Def, &d) != nil {
			continue
		}
		sch, err := cron.ParseFor(d.Schedule, nil, j.Name)
		if err != nil {
			continue
		}
		out = append(out, onetick.Job{Name: j.Name, Schedule: sch, Since: j.Since, Stream: s.stream, Prefer: onetick.PreferDuplicate})
	}
	return out, v, nil
}

// testJobStoreAtRunTime: a running leader fires a job added at run time
// within about a second, a changed job from its next slot, stops a
// removed one, and a job removed and added again does not fire the slots
// it missed.
func testJobStoreAtRunTime(t *testing.T, h Harness, b onetick.Backend) {
	const step = 100
	js := jobStore(t, b)
	ctx := ctxT(t)
	rec := newRecorder()
	r := startScheduler(t, onetick.Config{Backend: b, Replica: "r", Lease: fastLease, Sink: rec,
		Source: storeSource{js: js, stream: sk("rt")},
		// prefer duplicate: on a loaded machine the leader may lose its 1 s
		// lease; the next term then catches up, so the file's job stays
		// contiguous whatever the load.
		Jobs: []onetick.Job{{Name: "file", Schedule: every(t, "@every 100ms"), Stream: sk("rt"), Prefer: onetick.PreferDuplicate, MaxCatchup: 1000}}})
	start := onetick.SlotOf(time.Now())
	rec.waitSlot(t, "file", start+step)

	added := onetick.SlotOf(time.Now())
	if _, err := js.ApplyJobs(ctx, "rt", []onetick.StoredJob{{Name: "dyn", Def: def("@every 100ms")}}, false); err != nil {
		t.Fatal(err)
	}
	rec.waitSlot(t, "dyn", added+step) // the leader polls the version every second; waitSlot bounds it
	t.Logf("the added job fired %s after the apply", time.Since(added.Time()).Round(time.Millisecond))
	// Removed: it stops; removed for a while and added again: the slots
	// in between are not fired, whatever its preference.
	if _, err := js.RemoveJobs(ctx, "rt", []string{"dyn"}); err != nil {
		t.Fatal(err)
	}
	removed := onetick.SlotOf(time.Now())
	rec.waitSlot(t, "file", removed+25*step) // 2.5 s: the leader has seen the removal
	readded := onetick.SlotOf(time.Now())
	if _, err := js.ApplyJobs(ctx, "rt", []onetick.StoredJob{{Name: "dyn", Def: def("@every 100ms")}}, false); err != nil {
		t.Fatal(err)
	}
	rec.waitSlot(t, "dyn", readded+step)
	r.stop()
	var gap []onetick.Slot
	for _, x := range h.Stream(t, b, sk("rt")) {
		if x.Job == "dyn" && x.Slot > removed+15*step && x.Slot < readded {
			gap = append(gap, x.Slot)
		}
	}
	if len(gap) > 0 {
		t.Fatalf("dyn fired %d slots while removed (first %s), or caught them up after being added again", len(gap), gap[0])
	}
	checkContiguous(t, h.Stream(t, b, sk("rt")), "file", step)
}
