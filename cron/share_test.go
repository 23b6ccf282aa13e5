package cron

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestParseShares(t *testing.T) {
	a, err := Parse("0 * * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Parse("0 * * * *", nil)
	if a != b {
		t.Error("two parses of one expression: two schedules")
	}
	ny, _ := time.LoadLocation("America/New_York")
	c, _ := Parse("0 * * * *", ny)
	if c == a {
		t.Error("the same expression in another zone shares the UTC schedule")
	}
	// H: names hashing to the same values share, others do not.
	byValue := map[[2]uint64]*Schedule{}
	shared := 0
	for i := range 5000 {
		s, err := ParseFor("H H * * * *", nil, fmt.Sprintf("job%d", i))
		if err != nil {
			t.Fatal(err)
		}
		k := [2]uint64{s.second, s.minute}
		if p, ok := byValue[k]; ok {
			if p != s {
				t.Fatalf("job%d: equal H values, distinct schedules", i)
			}
			shared++
			continue
		}
		for _, p := range byValue {
			if p == s {
				t.Fatalf("job%d: distinct H values share a schedule", i)
			}
		}
		byValue[k] = s
	}
	if shared == 0 {
		t.Fatal("5000 names in 3600 values: none shared")
	}
	runtime.KeepAlive(byValue)
	// Day forms are not shared, and behave the same.
	d1, _ := Parse("0 0 L * *", nil)
	d2, _ := Parse("0 0 L * *", nil)
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	if !d1.Next(from).Equal(d2.Next(from)) {
		t.Error("L: two parses differ")
	}
}

// A schedule no job holds leaves the table.
func TestShareForgets(t *testing.T) {
	k := func() Schedule {
		s, _ := Parse("7 7 7 7 *", nil)
		return *s
	}()
	for range 1000 {
		runtime.GC()
		shared.Lock()
		_, ok := shared.m[k]
		shared.Unlock()
		if !ok {
			return
		}
		time.Sleep(10 * time.Millisecond) // the cleanup runs on its own goroutine
	}
	t.Fatal("the table still holds a collected schedule")
}
