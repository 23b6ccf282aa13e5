package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
)

// cmdNext prints the next N fire times strictly after --from.
func cmdNext(args []string, env Env) error {
	fs := newFlags("next", env)
	tz := fs.String("tz", "UTC", "IANA time zone of the expression")
	from := fs.String("from", "", "RFC 3339 instant to start after (default now)")
	n := fs.Int("n", 5, "how many fire times to print")
	job := fs.String("job", "", "job name from which H is hashed")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("next: want exactly one EXPR (quote it), got %d arguments", len(pos))
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil || *tz == "" || *tz == "Local" {
		return badInput("--tz: unknown time zone %q", *tz)
	}
	if *job != "" {
		if err := onetick.ValidJobName(*job); err != nil {
			return badInput("--job: %v", err)
		}
	}
	if *n < 1 || *n > 10000 {
		return badInput("-n: must be between 1 and 10000, got %d", *n)
	}
	t := time.Now()
	if *from != "" {
		if t, err = time.Parse(time.RFC3339Nano, *from); err != nil {
			return badInput("--from: not an RFC 3339 time (like 2026-03-29T00:00:00+01:00): %q", *from)
		}
	}
	s, err := cron.ParseFor(pos[0], loc, *job)
	if errors.Is(err, cron.ErrNoJobName) {
		return badInput("next: %q uses H, which is hashed from a job's name: add --job NAME", pos[0])
	}
	if err != nil {
		return usageError{err}
	}
	for i := 0; i < *n; i++ {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		fmt.Fprintln(env.Stdout, t.In(loc).Format(time.RFC3339Nano))
	}
	return nil
}
