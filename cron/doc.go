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
// Two extensions follow below: H, a value hashed from the job's name, in
// every field; and L, W and # for last days, nearest weekdays and n-th
// weekdays in the day fields. Out-of-range values, reversed ranges, step 0,
// empty list elements, unknown names, letters in the wrong field and a
// wrong number of fields are errors (*ParseError, which names the offending
// field, and for the extensions quotes the element: "H(30-20): range
// reversed", "5#6: week 6 does not exist (1-5)").
//
// Descriptors:
//
//	@yearly, @annually   0 0 1 1 *
//	@monthly             0 0 1 * *
//	@weekly              0 0 * * 0
//	@daily, @midnight    0 0 * * *
//	@hourly              0 * * * *
//
// The descriptors are these fixed times for every job; unlike Jenkins,
// where @hourly means "H * * * *", they are not hashed.
//
// An expression that cannot fire within 5 years (such as "0 0 30 2 *",
// "0 0 31 4 *" or "0 0 31W 2 *") is rejected; "0 0 29 2 *" is valid. With H
// the check is made for the job's own values. The check runs from the
// fixed wall time 2001-01-01T00:00:00 in the schedule's zone, so it is
// deterministic. Next returns the zero time when there is no fire instant
// within 5 years after its argument (for "0 0 29 2 *" this happens around 2100,
// which is not a leap year).
//
// # H: values hashed from the job name
//
// H (Jenkins' syntax) stands for a value chosen by a stable hash of the
// job's name: a thousand jobs written "H * * * *" spread over the hour
// instead of all firing at minute 0, and each job keeps its minute on every
// replica and in every version of onetick. An expression with H needs the
// job's name: ParseFor takes it; Parse, which has none, rejects H with a
// *ParseError whose cause is ErrNoJobName. onetick's configuration passes
// each job's name, and "onetick next" has --job.
//
//	form       meaning
//	H          one value of the field's hash range
//	H(a-b)     one value of a-b
//	H/s        the values h, h+s, h+2s, ... of the hash range, with h in [0, s)
//	H(a-b)/s   the values h, h+s, ... counted from a, up to b
//
// The hash range is the field's range (seconds and minutes 0-59, hours 0-23,
// months 1-12), except day-of-month, 1-28 as in Jenkins, so that the day
// exists in every month, and day-of-week, 0-6, so that Sunday (0 and 7) is
// not chosen twice as often. H(a-b) may name any range of its field, also
// with names (H(MON-FRI)); H(29-31) may then choose a day that some months
// lack, like a plain 29-31. The step may not exceed the size of the range.
// H may appear in every field, including seconds, and in lists
// ("0,H(30-59)"); H is written in upper or lower case.
//
// The value is defined as follows, and later versions keep it. The key is
// the byte string
//
//	name 0x00 field 0x00 k
//
// where name is the job name's bytes, field the field's name as ParseError
// spells it ("second", "minute", "hour", "day-of-month", "month",
// "day-of-week") and k, in decimal ASCII, the number of H elements before
// this one in the same field (0 for the first). Its hash is
//
//	h = fmix64(fnv1a64(key))
//
// with FNV-1a 64 (start at 14695981039346656037; for each byte, xor it in,
// then multiply by 1099511628211 modulo 2^64) and MurmurHash3's finaliser
// fmix64(x): x ^= x>>33; x *= 0xff51afd7ed558ccd; x ^= x>>33;
// x *= 0xc4ceb9fe1a85ec53; x ^= x>>33 (modulo 2^64). For H over a-b the
// value is a + h mod (b-a+1); for H/s over a-b the values are a + h mod s
// and every s-th after it up to b. The finaliser matters: the low bits of
// FNV-1a alone depend only on the low bits of the key's bytes, which would
// tie the parity of a job's minute to that of its hour. The field's name in
// the key keeps fields independent ("H H * * *" does not put the minute and
// the hour in step), and makes the 5- and 6-field forms agree ("H * * * *"
// and "0 H * * * *" choose the same minute); k keeps "H,H" from choosing
// one value twice. Example: for the job "billing" the key
// "billing\x00minute\x000" hashes to 0x579bbbf5183d2efa, whose remainder
// modulo 60 is 50; the hour's key gives 8, so "H H * * *" fires daily at
// 08:50.
//
// Jenkins takes its values from java.util.Random seeded with the SHA-1 of
// the name, so a job's values differ from the ones Jenkins would choose;
// ranges and steps are the same, except that H/1 here is every value of the
// range (Jenkins reads H/1 as H).
//
// # Last days, nearest weekdays, n-th weekdays
//
// As in Quartz and croner, day-of-month also accepts
//
//	L      the last day of the month
//	L-n    n days before the last day, n in 0-30 (L-1: the day before the
//	       last); a month shorter than n+1 days does not fire
//	nW     the weekday (Monday to Friday) nearest to day n, in the same
//	       month: a Saturday moves to the Friday before and a Sunday to the
//	       Monday after, except that Saturday the 1st moves to Monday the
//	       3rd and a Sunday that is the month's last day to the Friday
//	       before; a month without day n does not fire (31W skips April)
//	LW     the last weekday (Monday to Friday) of the month
//
// and day-of-week accepts
//
//	nL     the last weekday n of the month: 5L is the last Friday
//	n#k    the k-th weekday n of the month, k in 1-5: 5#3 is the third
//	       Friday; a month without a fifth such day does not fire for n#5
//
// n may be a number (7 is Sunday) or a name (FRI#3, FRIL). The letters are
// case-insensitive. These forms may stand in lists with the others
// ("1,15W,L", "MON#1,5L") but take no step or range ("L/2" and "1-5W" are
// errors). L alone in day-of-week, which Quartz reads as Saturday, is an
// error, and so are L, W and # in fields where they have no meaning ("W is
// only allowed in day-of-month"). Quartz's "?" is not accepted; write "*".
//
// # Day-of-month and day-of-week
//
// The two day fields combine as in Vixie cron: if either field starts with
// "*" (including steps such as "*/2"), a day must match both fields, so a plain
// "*" does not restrict; if both are restricted, a day matches when EITHER
// matches. "0 0 13 * 5" fires on every 13th and on every Friday; "0 0 13 * *"
// only on the 13th; "0 0 * * 5" only on Fridays.
//
// A field using H, L, W or # is restricted, and the rule applies unchanged:
// "0 0 L * 5L" fires on the last day of each month and on its last Friday;
// "0 0 L * *" only on the last day; "0 0 * * 5#3" only on the third Friday
// (this is what n#k is for: Vixie's "0 0 15-21 * 5" fires on the 15th to
// 21st and on every Friday). A field starting with "*" still narrows the
// other: "0 0 L * */2" fires on the last day when it is a Sunday, Tuesday,
// Thursday or Saturday.
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
// 02:00 → 01:30: "45 1 * * *" fires only at the first 01:45). H, L, W and #
// only choose values and days; within a day the rules are the same:
// "30 2 * * 0L" in Berlin fires at 03:00 CEST on 2026-03-29, the last
// Sunday of March, whose 02:30 does not exist. Gap and overlap handling is
// computed explicitly from the zone's transitions; it does not
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
