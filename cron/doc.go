// Package cron is onetick's schedule math: it parses schedule expressions and
// computes their fire instants. It is pure and deterministic — it never reads
// a clock and performs no I/O; every answer depends only on the expression,
// its time zone (and the tz database) and the instants passed in. A parsed
// *Schedule is immutable and safe for concurrent use.
//
// # Syntax
//
// A cron expression has five fields separated by whitespace,
//
//	minute hour day-of-month month day-of-week
//
// or six fields whose first field is seconds:
//
//	second minute hour day-of-month month day-of-week
//
// Leading and trailing whitespace is ignored. Ranges: second 0-59, minute
// 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-7 where both 0
// and 7 mean Sunday. Each field is a comma-separated list of these forms:
//
//	form    meaning
//	*       every value
//	n       a single value
//	a-b     a range (a <= b)
//	*/s     every s-th value of the field
//	a-b/s   every s-th value from a through b
//	a/s     every s-th value from a through the end of the field
//
// Months may be written JAN..DEC and weekdays SUN..SAT, case-insensitively,
// also in ranges and lists (a range ending in SUN, such as FRI-SUN, ends at 7).
// For day-of-week, "*" and "a/s" run through 6 (Saturday); 7 is only an alias.
// Out-of-range values, reversed ranges, step 0, empty list elements, unknown
// names and a wrong number of fields are errors (*ParseError, which names the
// offending field).
//
// Descriptors:
//
//	@yearly, @annually   0 0 1 1 *
//	@monthly             0 0 1 * *
//	@weekly              0 0 * * 0
//	@daily, @midnight    0 0 * * *
//	@hourly              0 * * * *
//
// An expression that cannot fire within 5 years (such as "0 0 30 2 *" or
// "0 0 31 4 *") is rejected; "0 0 29 2 *" is valid. The check runs from the
// fixed wall time 2001-01-01T00:00:00 in the schedule's zone, so it is
// deterministic. Next returns the zero time when there is no fire instant
// within 5 years after its argument (for "0 0 29 2 *" this happens around 2100,
// which is not a leap year).
//
// # Day-of-month and day-of-week
//
// The two day fields combine as in Vixie cron: if either field starts with
// "*" (including steps such as "*/2"), a day must match both fields, so a plain
// "*" does not restrict; if both are restricted, a day matches when EITHER
// matches. "0 0 13 * 5" fires on every 13th and on every Friday; "0 0 13 * *"
// only on the 13th; "0 0 * * 5" only on Fridays.
//
// # @every
//
// "@every <duration>" and "@every <duration> +<offset>" (for example
// "@every 1h +15m") describe absolute time aligned to the Unix epoch: the fire
// instants are exactly the t with (t_ms − offset_ms) mod d_ms == 0. The
// duration uses Go syntax (time.ParseDuration), must be a whole number of
// milliseconds, at least 1ms and at most 43800h (5×365 days); the offset must
// be a whole number of milliseconds in [0, d). The time zone is irrelevant and
// daylight saving never affects @every: "@every 15m" fires 92 times on a 23-hour
// spring-forward day and 100 times on a 25-hour fall-back day. For @every,
// Count is O(1) arithmetic.
//
// # Time zones and daylight saving
//
// Cron fields are matched against the wall clock of the schedule's IANA time
// zone (UTC if none is given). Every matching wall time fires exactly once, at
// the first instant at which the zone's clock shows that wall time or a later
// one, and several wall times that map onto the same instant fire once in
// total. Consequently:
//
//   - Spring-forward gap: a wall time the gap skips fires once, at the first
//     instant after the gap. In Europe/Berlin on 2026-03-29 clocks jump from
//     02:00 CET to 03:00 CEST, so "30 2 * * *" fires at 03:00 CEST
//     (01:00Z), and "*/15 * * * *" fires once at 03:00 CEST for 02:00, 02:15,
//     02:30, 02:45 and 03:00 together, never twice at the same instant.
//
//   - Fall-back overlap: a wall time the fall-back repeats fires once, at its
//     FIRST occurrence. In Europe/Berlin on 2026-10-25 clocks go back from
//     03:00 CEST to 02:00 CET, so "30 2 * * *" fires at 02:30 CEST (00:30Z)
//     only, not at 02:30 CET. This applies to every schedule: "*/15 * * * *"
//     fires at 02:00, 02:15, 02:30 and 02:45 CEST and then not again until
//     03:00 CET — it does not fire during the second pass of the repeated
//     hour, leaving a gap of 75 minutes. Jobs that must run at a fixed
//     interval regardless of the wall clock should use @every instead.
//
// The same rules hold for 30-minute shifts such as Australia/Lord_Howe
// (2026-10-04 02:00 → 02:30: "15 2 * * *" fires at 02:30; 2026-04-05
// 02:00 → 01:30: "45 1 * * *" fires only at the first 01:45). Gap and overlap
// handling is computed explicitly from the zone's transitions; it does not
// depend on time.Date, whose choice of offset inside a gap is unspecified.
//
// # Results
//
// Next, Slots and Count work on the half-open convention: Next returns the
// first instant strictly after its argument (even if the argument is itself a
// fire instant or has sub-millisecond parts), and Slots and Count cover
// (a, b]. All returned instants are in UTC, truncated to milliseconds. Instants
// more than about 317,000 years from 1970 are outside the supported range and
// yield nothing.
package cron
