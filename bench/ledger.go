package main

// The ledger part (-only ledger, issue 20): what the run ledger costs on
// each store that keeps one. For Redis, PostgreSQL and the file store:
// claim throughput with the ledger on against the same claims with it off
// (alternating rounds, each on a fresh prefix, schema or file), the delay
// of a small claim, the bytes a record takes, and the time to read a job
// with 100,000 records the way `onetick runs` does (first page, a page
// deep in the job, a fate filter that matches nothing).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	otpostgres "github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/sqlite"
)

const (
	ledgerJobs    = 2000   // jobs per throughput claim round
	ledgerCalls   = 20     // claims of one tick per job, per round
	ledgerRounds  = 3      // rounds, alternating on and off
	ledgerSmall   = 10     // ticks in a latency claim
	ledgerSmallN  = 200    // latency claims per store and mode
	ledgerBig     = 100000 // records of the job read back
	ledgerBigCall = 1000   // ticks per claim while filling it
)

// ledgerStore opens one store kind, on a fresh namespace per call, and
// tells how many bytes that namespace holds.
type ledgerStore struct {
	name string
	open func(ctx context.Context, on bool, max int) (onetick.Backend, func() (int64, error), error)
}

func (e *env) ledgerStores(ctx context.Context, pg pgAdmin, dir string) []ledgerStore {
	n := 0
	ret := func(on bool, max int) onetick.LedgerRetention {
		return onetick.LedgerRetention{Off: !on, MaxPerJob: max}
	}
	return []ledgerStore{
		{name: "Redis", open: func(ctx context.Context, on bool, max int) (onetick.Backend, func() (int64, error), error) {
			if err := e.adm.flush(ctx); err != nil {
				return nil, nil, err
			}
			base, err := e.adm.usedMemory(ctx)
			if err != nil {
				return nil, nil, err
			}
			n++
			be := otredis.New(e.adm.c, otredis.Options{Prefix: fmt.Sprintf("lg%d", n), Ledger: ret(on, max)})
			return be, func() (int64, error) {
				m, err := e.adm.usedMemory(ctx)
				return m - base, err
			}, nil
		}},
		{name: "PostgreSQL", open: func(ctx context.Context, on bool, max int) (onetick.Backend, func() (int64, error), error) {
			schema, err := pg.freshSchema(ctx, "ledger")
			if err != nil {
				return nil, nil, err
			}
			be, err := otpostgres.Open(ctx, pgURL(), otpostgres.Options{Schema: schema, Ledger: ret(on, max)})
			if err != nil {
				return nil, nil, err
			}
			if err := be.Migrate(ctx); err != nil {
				be.Close()
				return nil, nil, err
			}
			return be, func() (int64, error) {
				var size int64
				err := pg.pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
					FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
					WHERE s.nspname = $1 AND c.relkind IN ('r', 'm', 't')`, schema).Scan(&size)
				return size, err
			}, nil
		}},
		{name: "file", open: func(ctx context.Context, on bool, max int) (onetick.Backend, func() (int64, error), error) {
			n++
			path := filepath.Join(dir, fmt.Sprintf("ledger%d.db", n))
			be, err := sqlite.Open(path, sqlite.Options{Ledger: ret(on, max)})
			if err != nil {
				return nil, nil, err
			}
			return be, func() (int64, error) {
				var size int64
				for _, p := range []string{path, path + "-wal"} {
					if st, err := os.Stat(p); err == nil {
						size += st.Size()
					}
				}
				return size, nil
			}, nil
		}},
	}
}

// ledgerResult is one store's figures.
type ledgerResult struct {
	tput          [2][]float64 // [off, on] ticks per second, per round
	small         [2][]time.Duration
	bytesOn       int64         // per record
	fold          time.Duration // the first read of the big job (Redis folds its log then)
	first, deep   time.Duration
	filter        time.Duration
	filled, pages int
	err           error
}

func (e *env) ledgerSection(ctx context.Context) (string, error) {
	pool, err := pgxPool(ctx)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	pg := pgAdmin{pool: pool}
	defer pg.dropSchemas(context.Background())
	dir, err := os.MkdirTemp("", "onetick-bench-ledger-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)

	stores := e.ledgerStores(ctx, pg, dir)
	res := make([]ledgerResult, len(stores))
	for i, s := range stores {
		res[i] = ledgerRun(ctx, s)
	}

	var out strings.Builder
	fmt.Fprintf(&out, "## The run ledger: its cost per store\n\n")
	fmt.Fprintf(&out, "Each figure with the ledger on (default retention: 7 days, 1,000 records per job) and off (`ledger: {off: true}`), on a fresh prefix, schema or file per run; rounds alternate off, on. Throughput: %d claims of one tick for each of %d jobs, per round, %d rounds per mode. Small claim: %d claims of %d ticks. Bytes per record: the store's size after %d × %d ticks with the ledger on, minus the same with it off, over the ticks. Read: one job with %d records (retention raised to hold them), read through `onetick.Ledger` as `onetick runs` does.\n\n",
		ledgerCalls, ledgerJobs, ledgerRounds, ledgerSmallN, ledgerSmall, ledgerCalls, ledgerJobs, ledgerBig)
	fmt.Fprintf(&out, "| | %s |\n|---|%s\n", strings.Join(names(stores), " | "), strings.Repeat("---|", len(stores)))
	row := func(metric string, f func(r ledgerResult) string) {
		cells := make([]string, len(res))
		for i, r := range res {
			if r.err != nil {
				cells[i] = "error: " + r.err.Error()
				continue
			}
			cells[i] = f(r)
		}
		fmt.Fprintf(&out, "| %s | %s |\n", metric, strings.Join(cells, " | "))
	}
	row("claim throughput, ledger off (ticks/s, per round)", func(r ledgerResult) string { return fmtRates(r.tput[0]) })
	row("claim throughput, ledger on (ticks/s, per round)", func(r ledgerResult) string { return fmtRates(r.tput[1]) })
	row("on / off (median rounds)", func(r ledgerResult) string {
		return fmt.Sprintf("%.0f %%", 100*median(r.tput[1])/median(r.tput[0]))
	})
	row(fmt.Sprintf("%d-tick claim p50 / p99, off", ledgerSmall), func(r ledgerResult) string {
		return fmtDur(pct(r.small[0], 50)) + " / " + fmtDur(pct(r.small[0], 99))
	})
	row(fmt.Sprintf("%d-tick claim p50 / p99, on", ledgerSmall), func(r ledgerResult) string {
		return fmtDur(pct(r.small[1], 50)) + " / " + fmtDur(pct(r.small[1], 99))
	})
	row("bytes per record (one event, records brought up to date)", func(r ledgerResult) string { return fmt.Sprintf("%d B", r.bytesOn) })
	row(fmt.Sprintf("runs over %d records: the first read (Redis: folds the log)", ledgerBig), func(r ledgerResult) string { return fmtDur(r.fold) })
	row("runs: first page (100)", func(r ledgerResult) string { return fmtDur(r.first) })
	row("runs: the page after record 50,000", func(r ledgerResult) string { return fmtDur(r.deep) })
	row("runs: --fate dead (matches none)", func(r ledgerResult) string { return fmtDur(r.filter) })
	out.WriteString("\nThe target of issue 20 is ≥ 90 % of the throughput with the ledger on. docs/ledger.md explains where each store's cost goes.\n")
	return out.String(), nil
}

func names(stores []ledgerStore) []string {
	ns := make([]string, len(stores))
	for i, s := range stores {
		ns[i] = s.name
	}
	return ns
}

func fmtRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, ", ")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

func ledgerRun(ctx context.Context, s ledgerStore) (r ledgerResult) {
	var sizes [2]int64
	for round := 0; round < ledgerRounds; round++ {
		for mode := 0; mode < 2; mode++ {
			progress("ledger %s: round %d, ledger %s", s.name, round+1, map[int]string{0: "off", 1: "on"}[mode])
			rate, size, small, err := ledgerClaims(ctx, s, mode == 1)
			if err != nil {
				r.err = err
				return r
			}
			r.tput[mode] = append(r.tput[mode], rate)
			r.small[mode] = append(r.small[mode], small...)
			sizes[mode] = size
		}
	}
	r.small[0], r.small[1] = sortedCopy(r.small[0]), sortedCopy(r.small[1])
	r.bytesOn = (sizes[1] - sizes[0]) / (ledgerCalls * ledgerJobs)
	progress("ledger %s: %d records of one job, read back", s.name, ledgerBig)
	r.fold, r.first, r.deep, r.filter, r.err = ledgerRead(ctx, s)
	return r
}

// ledgerClaims opens a fresh namespace, claims ledgerCalls rounds of one
// tick per job, then the small claims, and returns the throughput, the
// namespace's size after the big claims and the small claims' delays.
func ledgerClaims(ctx context.Context, s ledgerStore, on bool) (float64, int64, []time.Duration, error) {
	be, size, err := s.open(ctx, on, 0)
	if err != nil {
		return 0, 0, nil, err
	}
	defer be.Close()
	g, err := be.Acquire(ctx, "bench", time.Minute)
	if err != nil {
		return 0, 0, nil, err
	}
	base := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
	ticks := make([]onetick.Tick, ledgerJobs)
	start := time.Now()
	for c := 0; c < ledgerCalls; c++ {
		for j := range ticks {
			ticks[j] = ledgerTick(fmt.Sprintf("job%04d", j), base+onetick.Slot(c*1000))
		}
		if _, err := be.Claim(ctx, g.Lease, ticks); err != nil {
			return 0, 0, nil, err
		}
	}
	rate := float64(ledgerCalls*ledgerJobs) / time.Since(start).Seconds()
	if l, ok := be.(onetick.Ledger); ok && on {
		// A read brings the records up to date (Redis folds its log into
		// them), so the size below is the records', not the log's.
		if _, err := l.Runs(ctx, onetick.RunQuery{Job: "job0000", Limit: 1}); err != nil {
			return 0, 0, nil, err
		}
	}
	bytes, err := size()
	if err != nil {
		return 0, 0, nil, err
	}
	var small []time.Duration
	for c := 0; c < ledgerSmallN; c++ {
		batch := make([]onetick.Tick, ledgerSmall)
		for j := range batch {
			batch[j] = ledgerTick(fmt.Sprintf("small%02d", j), base+onetick.Slot(c*1000))
		}
		t0 := time.Now()
		if _, err := be.Claim(ctx, g.Lease, batch); err != nil {
			return 0, 0, nil, err
		}
		small = append(small, time.Since(t0))
	}
	return rate, bytes, small, nil
}

func ledgerTick(job string, slot onetick.Slot) onetick.Tick {
	return onetick.Tick{Job: job, Slot: slot, Stream: "ticks", Payload: `{}`, MaxLen: 1000, Retention: time.Hour}
}

// ledgerRead fills one job with ledgerBig records and times three reads.
func ledgerRead(ctx context.Context, s ledgerStore) (fold, first, deep, filter time.Duration, err error) {
	be, _, err := s.open(ctx, true, ledgerBig)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer be.Close()
	l, ok := be.(onetick.Ledger)
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("%s keeps no ledger", s.name)
	}
	g, err := be.Acquire(ctx, "bench", time.Hour)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	// Slots a second apart, the newest an hour ago: 100,000 s is about
	// 28 hours, inside the default age of 7 days.
	base := onetick.SlotOf(time.Now().Add(-time.Hour - ledgerBig*time.Second).Truncate(time.Second))
	batch := make([]onetick.Tick, ledgerBigCall)
	for done := 0; done < ledgerBig; done += ledgerBigCall {
		for k := range batch {
			batch[k] = ledgerTick("big", base+onetick.Slot((done+k)*1000))
		}
		if _, err := be.Claim(ctx, g.Lease, batch); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	t0 := time.Now()
	if _, err := l.Runs(ctx, onetick.RunQuery{Job: "big", Limit: 1}); err != nil {
		return 0, 0, 0, 0, err
	}
	fold = time.Since(t0)
	t0 = time.Now()
	p, err := l.Runs(ctx, onetick.RunQuery{Job: "big", Limit: 100})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	first = time.Since(t0)
	if len(p.Runs) != 100 {
		return 0, 0, 0, 0, fmt.Errorf("%s: first page has %d records, want 100", s.name, len(p.Runs))
	}
	// The record at depth 50,000 (newest first), as a cursor.
	mid := base + onetick.Slot((ledgerBig-50000)*1000)
	t0 = time.Now()
	p, err = l.Runs(ctx, onetick.RunQuery{Job: "big", Limit: 100, After: storekit.Cursor(onetick.Run{Slot: mid, Tick: onetick.TickID("big", mid)})})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	deep = time.Since(t0)
	if len(p.Runs) != 100 || p.Runs[0].Slot >= mid {
		return 0, 0, 0, 0, fmt.Errorf("%s: the deep page is wrong (%d records)", s.name, len(p.Runs))
	}
	t0 = time.Now()
	p, err = l.Runs(ctx, onetick.RunQuery{Job: "big", Fate: onetick.FateDead})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	filter = time.Since(t0)
	if len(p.Runs) != 0 {
		return 0, 0, 0, 0, fmt.Errorf("%s: --fate dead found %d records", s.name, len(p.Runs))
	}
	return fold, first, deep, filter, nil
}

// pgxPool connects the harness to PostgreSQL.
func pgxPool(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w (scripts/install-deps.sh installs and starts it)", pgURL(), err)
	}
	return pool, nil
}
