package cron

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// refSet returns the values the reference chooses for field (0 second ..
// 5 day-of-week) of expr.
func refSet(t *testing.T, expr, name string, field int) []int {
	t.Helper()
	r, err := refParse(expr, name)
	if err != nil {
		t.Fatalf("reference rejects %q for %q", expr, name)
	}
	return r.values(field)
}

func bitsOf(set uint64) []int {
	var out []int
	for v := 0; v < 64; v++ {
		if set&(1<<uint(v)) != 0 {
			out = append(out, v)
		}
	}
	return out
}

// The package's hash (a hand-written FNV-1a loop) agrees with the
// documented formula computed with hash/fnv.
func TestHashFormula(t *testing.T) {
	for _, name := range []string{"", "a", "billing", "nightly-billing", "job-0", "job-1", "ünïcode", strings.Repeat("x", 300)} {
		for _, f := range refFields {
			for k := 0; k < 3; k++ {
				if got, want := hash64(hashKey(name, f.name, k)), refHash(name, f.name, k); got != want {
					t.Fatalf("hash(%q, %s, %d) = %#x, formula gives %#x", name, f.name, k, got, want)
				}
			}
		}
	}
}

// The values are part of the format: a job keeps its minute across
// versions. These were computed once from the documented formula; a change
// here moves every H job of every user.
func TestHashPinned(t *testing.T) {
	// The example of doc.go, also computed by a third implementation
	// (Python) when it was written.
	if got := hash64("billing\x00minute\x000"); got != 0x579bbbf5183d2efa {
		t.Errorf("hash = %#x", got)
	}
	cases := []struct {
		name string
		want [5]int // minute hour day-of-month month day-of-week of "H H H H H"
	}{
		{"billing", [5]int{50, 8, 3, 3, 5}},
		{"nightly-billing", [5]int{5, 14, 7, 8, 5}},
		{"job-0", [5]int{13, 2, 20, 1, 0}},
	}
	for _, c := range cases {
		s, err := ParseFor("H H H H H", nil, c.name)
		if err != nil {
			t.Fatal(err)
		}
		got := [5]int{bitsOf(s.minute)[0], bitsOf(s.hour)[0], bitsOf(s.dom)[0], bitsOf(s.month)[0], bitsOf(s.dow)[0]}
		if got != c.want {
			t.Errorf("%q: H H H H H = %v, want %v", c.name, got, c.want)
		}
	}
}

// Every H form chooses what the reference chooses, for many names.
func TestHashForms(t *testing.T) {
	exprs := []string{
		"H * * * *", "H/15 * * * *", "H(0-29)/10 * * * *", "H(10-20) * * * *", "H,H 0 * * *", "0,H,H(40-59) 0 * * *",
		"0 H * * *", "0 H/6 * * *", "0 H(2-5) * * *", "0 0 H * *", "0 0 H/10 * *", "0 0 H(29-31) * *",
		"0 0 1 H *", "0 0 1 H/3 *", "0 0 1 H(JAN-mar) *", "0 0 * * H", "0 0 * * H/2", "0 0 * * H(mon-FRI)",
		"0 0 * * H(FRI-SUN)", "0 0 * * H(1-7)", "H H * * * *", "H/20 * * * * *", "h(0-9) h * * *",
	}
	for _, expr := range exprs {
		for i := range 100 {
			name := fmt.Sprintf("job-%d", i)
			s, err := ParseFor(expr, nil, name)
			if err != nil {
				// H(29-31) in day-of-month may never fire in February.
				if !strings.Contains(expr, "29-31") {
					t.Fatalf("ParseFor(%q, %q): %v", expr, name, err)
				}
				continue
			}
			fields := 5
			if len(strings.Fields(expr)) == 6 {
				fields = 6
			}
			r, err := refParse(expr, name)
			if err != nil {
				t.Fatalf("reference rejects %q for %q", expr, name)
			}
			for fi, set := range []uint64{s.second, s.minute, s.hour, s.dom, s.month, s.dow} {
				want := r.values(fi)
				if got := bitsOf(set); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%q for %q (%d fields): field %s = %v, reference %v", expr, name, fields, refFields[fi].name, got, want)
				}
			}
		}
	}
}

// The same job gets the same values whatever the zone, and whether the
// expression has a seconds field; different jobs get different ones.
func TestHashStable(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	a, _ := ParseFor("H H * * *", nil, "billing")
	b, _ := ParseFor("H H * * *", berlin, "billing")
	c, _ := ParseFor("0 H H * * *", nil, "billing")
	if a.minute != b.minute || a.hour != b.hour || a.minute != c.minute || a.hour != c.hour {
		t.Errorf("billing: minutes %v %v %v, hours %v %v %v", bitsOf(a.minute), bitsOf(b.minute), bitsOf(c.minute),
			bitsOf(a.hour), bitsOf(b.hour), bitsOf(c.hour))
	}
	if a.String() != "H H * * *" || b.Location() != berlin || a.Interval() != 0 {
		t.Errorf("accessors: %q %v %v", a.String(), b.Location(), a.Interval())
	}
	// H,H hashes each element on its own.
	differ := 0
	for i := range 100 {
		s, err := ParseFor("H,H * * * *", nil, fmt.Sprintf("job-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(bitsOf(s.minute)) == 2 {
			differ++
		}
	}
	if differ < 90 {
		t.Errorf("H,H gave two minutes for only %d of 100 jobs", differ)
	}
}

// Over many job names the hashed values cover each field's range evenly,
// and the fields of one job are independent. The names are fixed, so the
// bounds are checked once against known counts, not a random sample.
func TestHashSpread(t *testing.T) {
	const n = 12000
	type field struct {
		expr string
		set  func(*Schedule) uint64
		lo   int
		size int
	}
	fields := []field{
		{"H * * * *", func(s *Schedule) uint64 { return s.minute }, 0, 60},
		{"0 H * * *", func(s *Schedule) uint64 { return s.hour }, 0, 24},
		{"0 0 H * *", func(s *Schedule) uint64 { return s.dom }, 1, 28},
		{"0 0 1 H *", func(s *Schedule) uint64 { return s.month }, 1, 12},
		{"0 0 * * H", func(s *Schedule) uint64 { return s.dow }, 0, 7},
		{"H * * * * *", func(s *Schedule) uint64 { return s.second }, 0, 60},
		{"H/15 * * * *", func(s *Schedule) uint64 { return s.minute & (1<<15 - 1) }, 0, 15},
	}
	for _, f := range fields {
		counts := make([]int, f.size)
		for i := range n {
			s, err := ParseFor(f.expr, nil, fmt.Sprintf("job-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			vals := bitsOf(f.set(s))
			if len(vals) != 1 || vals[0] < f.lo || vals[0] >= f.lo+f.size {
				t.Fatalf("%q: values %v", f.expr, vals)
			}
			counts[vals[0]-f.lo]++
		}
		// Chi-square against the uniform distribution: for these degrees
		// of freedom (6..59) the 0.999 quantile is below 2·df+30.
		exp := float64(n) / float64(f.size)
		chi := 0.0
		for _, c := range counts {
			chi += (float64(c) - exp) * (float64(c) - exp) / exp
		}
		if df := float64(f.size - 1); chi > 2*df+30 {
			t.Errorf("%q: chi-square %.1f for %d buckets, counts %v", f.expr, chi, f.size, counts)
		}
		for v, c := range counts {
			if math.Abs(float64(c)-exp) > 5*math.Sqrt(exp) {
				t.Errorf("%q: value %d chosen %d times, expected about %.0f", f.expr, v+f.lo, c, exp)
			}
		}
	}
	// Independence: "H H * * *" spreads over the 24×60 (hour, minute)
	// pairs; in particular minute mod 12 and hour mod 12 are uncorrelated
	// (FNV-1a without the finaliser fails this on the low bits).
	var pairs [12][12]int
	same := 0
	for i := range n {
		s, _ := ParseFor("H H * * *", nil, fmt.Sprintf("job-%d", i))
		m, h := bitsOf(s.minute)[0], bitsOf(s.hour)[0]
		pairs[m%12][h%12]++
		if m%24 == h {
			same++
		}
	}
	exp := float64(n) / 144
	chi := 0.0
	for _, row := range pairs {
		for _, c := range row {
			chi += (float64(c) - exp) * (float64(c) - exp) / exp
		}
	}
	if chi > 2*143+30 {
		t.Errorf("minute and hour look dependent: chi-square %.1f over 144 buckets", chi)
	}
	if float64(same) > 1.5*float64(n)/24 {
		t.Errorf("minute mod 24 == hour for %d of %d jobs", same, n)
	}
}

func TestHashErrors(t *testing.T) {
	cases := []struct {
		expr, name, field, msg string
	}{
		{"H * * * *", "", "minute", "H needs a job name"},
		{"0 0 * * H", "", "day-of-week", "H needs a job name"},
		{"H(30-20) * * * *", "a", "minute", "H(30-20): range reversed"},
		{"0 H(20-3) * * *", "a", "hour", "H(20-3): range reversed"},
		{"H/90 * * * *", "a", "minute", "H/90: step 90 is larger than the 60 values of 0-59"},
		{"0 0 H/29 * *", "a", "day-of-month", "H/29: step 29 is larger than the 28 values of 1-28"},
		{"H(0-9)/11 * * * *", "a", "minute", "step 11 is larger than the 10 values of 0-9"},
		{"H/0 * * * *", "a", "minute", "step must be positive"},
		{"H/x * * * *", "a", "minute", "invalid step"},
		{"H(0-60) * * * *", "a", "minute", "out of range 0-59"},
		{"0 0 H(0-5) * *", "a", "day-of-month", "out of range 1-31"},
		{"H(1-5 * * * *", "a", "minute", "missing \")\""},
		{"H(5) * * * *", "a", "minute", "expected a range a-b"},
		{"H5 * * * *", "a", "minute", "expected H, H(a-b), H/s or H(a-b)/s"},
		{"0 0 1 H(FOO-DEC) *", "a", "month", "invalid value"},
		{"HH * * * *", "a", "minute", "expected H"},
	}
	for _, c := range cases {
		_, err := ParseFor(c.expr, nil, c.name)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseFor(%q, %q) = %v, want a *ParseError", c.expr, c.name, err)
			continue
		}
		if pe.Field != c.field || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("ParseFor(%q, %q): field %q msg %q, want %q containing %q", c.expr, c.name, pe.Field, pe.Msg, c.field, c.msg)
		}
		if noName := errors.Is(err, ErrNoJobName); noName != (c.name == "") {
			t.Errorf("ParseFor(%q, %q): errors.Is(ErrNoJobName) = %v", c.expr, c.name, noName)
		}
	}
	// Parse is ParseFor without a name.
	if _, err := Parse("H * * * *", nil); !errors.Is(err, ErrNoJobName) ||
		err.Error() != `cron: "H * * * *": minute: H needs a job name, from which its value is hashed (cron.ParseFor)` {
		t.Errorf("Parse(H) = %v", err)
	}
	// Without H the name is irrelevant.
	a, b := mustParse(t, "*/5 1 L * 5#2", nil), must(ParseFor("*/5 1 L * 5#2", nil, "x"))
	from := mustTime(t, jan1)
	if fmt.Sprint(nextN(a, from, 5)) != fmt.Sprint(nextN(b, from, 5)) {
		t.Errorf("the name changed an expression without H")
	}
}

func must(s *Schedule, err error) *Schedule {
	if err != nil {
		panic(err)
	}
	return s
}

// Next for H expressions follows the hashed values, written out here.
func TestNextHash(t *testing.T) {
	from := mustTime(t, jan1)
	for i := range 50 {
		name := fmt.Sprintf("svc-%d", i)
		m := refSet(t, "H * * * *", name, 1)[0]
		h := refSet(t, "H H * * *", name, 2)[0]
		s := must(ParseFor("H H * * *", nil, name))
		want := []string{
			time.Date(2026, 1, 1, h, m, 0, 0, time.UTC).Format(time.RFC3339),
			time.Date(2026, 1, 2, h, m, 0, 0, time.UTC).Format(time.RFC3339),
		}
		if h == 0 && m == 0 {
			want = []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}
		}
		if got := nextN(s, from, 2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q H H * * *: %v, want %v", name, got, want)
		}
		off := refSet(t, "H/15 * * * *", name, 1)[0]
		q := must(ParseFor("H/15 * * * *", nil, name))
		if off != m%15 {
			t.Fatalf("%q: H/15 offset %d, H minute %d", name, off, m)
		}
		var want15 []string
		for v := off; len(want15) < 5; v += 15 {
			if v > 0 {
				want15 = append(want15, from.Add(time.Duration(v)*time.Minute).Format(time.RFC3339))
			}
		}
		if got := nextN(q, from, 5); fmt.Sprint(got) != fmt.Sprint(want15) {
			t.Fatalf("%q H/15: %v, want %v", name, got, want15)
		}
	}
}
