package cron

import (
	"testing"
	"time"
)

var sink time.Time

func BenchmarkNextCron(b *testing.B) {
	s := mustParse(b, "*/5 * * * *", mustLoc(b, "Europe/Berlin"))
	t := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		t = s.Next(t)
	}
	sink = t
}

// The day forms and H cost a per-day check only for expressions using them.
func BenchmarkNextCronDayForms(b *testing.B) {
	s, err := ParseFor("H H(8-17) L,15W * 5L", mustLoc(b, "Europe/Berlin"), "billing")
	if err != nil {
		b.Fatal(err)
	}
	t := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		t = s.Next(t)
	}
	sink = t
}

func BenchmarkNextEvery(b *testing.B) {
	s := mustParse(b, "@every 1m +15s", nil)
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		t = s.Next(t)
	}
	sink = t
}

func BenchmarkParse(b *testing.B) {
	loc := mustLoc(b, "Europe/Berlin")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("0,30 9-17/2 * JAN-NOV MON-FRI", loc); err != nil {
			b.Fatal(err)
		}
	}
}
