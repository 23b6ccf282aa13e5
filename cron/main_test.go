package cron

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mustTime parses an RFC 3339 time (with optional fractional seconds).
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad test time %q: %v", s, err)
	}
	return v
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func mustParse(t testing.TB, expr string, loc *time.Location) *Schedule {
	t.Helper()
	s, err := Parse(expr, loc)
	if err != nil {
		t.Fatalf("Parse(%q): %v", expr, err)
	}
	return s
}

// nextN returns the n fire instants after from, formatted as RFC 3339.
func nextN(s *Schedule, from time.Time, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		from = s.Next(from)
		if from.IsZero() {
			out = append(out, "zero")
			break
		}
		out = append(out, from.Format(time.RFC3339Nano))
	}
	return out
}

type nextCase struct {
	name string
	expr string
	zone string // "" = UTC
	from string
	want []string
}

func runNextCases(t *testing.T, cases []nextCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var loc *time.Location
			if c.zone != "" {
				loc = mustLoc(t, c.zone)
			}
			s := mustParse(t, c.expr, loc)
			got := nextN(s, mustTime(t, c.from), len(c.want))
			if len(got) != len(c.want) {
				t.Fatalf("%q from %s: got %v, want %v", c.expr, c.from, got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("%q from %s: got %v, want %v", c.expr, c.from, got, c.want)
				}
			}
		})
	}
}
