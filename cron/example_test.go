package cron_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/onetick/onetick/cron"
)

func Example() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	s, err := cron.Parse("30 2 * * *", berlin)
	if err != nil {
		panic(err)
	}
	// 2026-03-29 02:30 does not exist in Berlin: it fires at 03:00 CEST.
	t := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	for range 2 {
		t = s.Next(t)
		fmt.Println(t, "=", t.In(berlin).Format("15:04 MST"))
	}

	every, _ := cron.Parse("@every 1h +15m", nil)
	fmt.Println(every.Next(time.Date(2026, 1, 1, 12, 20, 0, 0, time.UTC)), every.Interval())

	_, err = cron.Parse("0 0 30 2 *", nil)
	fmt.Println(err)
	// Output:
	// 2026-03-29 01:00:00 +0000 UTC = 03:00 CEST
	// 2026-03-30 00:30:00 +0000 UTC = 02:30 CEST
	// 2026-01-01 13:15:00 +0000 UTC 1h0m0s
	// cron: "0 0 30 2 *": day-of-month: no fire time within 5 years
}

func ExampleParseFor() {
	// H is hashed from the job's name: every replica computes 08:50 for
	// "billing", and other jobs land elsewhere in the day.
	s, err := cron.ParseFor("H H * * *", nil, "billing")
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))

	_, err = cron.Parse("H H * * *", nil)
	fmt.Println(errors.Is(err, cron.ErrNoJobName))

	// The last Friday of each month, at 18:00.
	last, _ := cron.Parse("0 18 * * 5L", nil)
	fmt.Println(last.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	// Output:
	// 2026-01-01 08:50:00 +0000 UTC
	// true
	// 2026-01-30 18:00:00 +0000 UTC
}
