package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
)

// Jobs defined at run time: `onetick jobs apply` and `onetick jobs rm`,
// the HTTP API's /api/v1/jobsets, and the source the leader reads them
// from.

// gcMu serializes the readers that lower the GC percentage for a while, so
// that each restores what it found.
var gcMu sync.Mutex

// storeSource reads the jobs defined at run time for the scheduler.
type storeSource struct {
	js       onetick.JobStore
	fileJobs map[string]bool
	log      *slog.Logger
}

// newStoreSource is the source of b's jobs defined at run time, beside
// the file's jobs; nil when b keeps none.
func newStoreSource(b onetick.Backend, fileJobs []onetick.Job, log *slog.Logger) onetick.JobSource {
	js, ok := b.(onetick.JobStore)
	if !ok {
		return nil
	}
	names := make(map[string]bool, len(fileJobs))
	for _, j := range fileJobs {
		names[j.Name] = true
	}
	return storeSource{js: js, fileJobs: names, log: log}
}

func (s storeSource) Version(ctx context.Context) (int64, error) { return s.js.JobsVersion(ctx) }

func (s storeSource) Jobs(ctx context.Context) ([]onetick.Job, int64, error) {
	// Every definition is read at once and most of it is garbage a moment
	// later: collect more often meanwhile, so that the process's peak stays
	// near what it keeps rather than twice that (a million stored jobs:
	// see docs/benchmarks.md).
	gcMu.Lock()
	defer gcMu.Unlock()
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	stored, v, err := s.js.StoredJobs(ctx)
	if err != nil && stored == nil {
		return nil, 0, err
	}
	// Read on every core: a million definitions take seconds on one.
	parsed := make([]onetick.Job, len(stored))
	taken := make([]bool, len(stored))
	type failure struct {
		name, set string
		err       error
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), len(stored)/10_000))
	chunk := (len(stored) + workers - 1) / workers
	failed := make([][]failure, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var defs config.Defs // jobs written alike share a parsed schedule
			for i := w * chunk; i < min((w+1)*chunk, len(stored)); i++ {
				sj := stored[i]
				// Read once: let it go as the jobs are built (its strings
				// hold the whole value read from the store).
				stored[i] = onetick.StoredJob{}
				if s.fileJobs[sj.Name] {
					continue // the scheduler logs the clash
				}
				j, _, err := defs.Job(sj.Def)
				if err != nil {
					failed[w] = append(failed[w], failure{sj.Name, sj.Set, err})
					continue
				}
				j.Since = sj.Since
				parsed[i], taken[i] = j, true
			}
		}()
	}
	wg.Wait()
	for _, fs := range failed {
		for _, f := range fs {
			s.log.Error("a job defined at run time cannot be used; ignored", "job", f.name, "set", f.set, "err", f.err)
		}
	}
	out := parsed[:0]
	for i := range parsed {
		if taken[i] {
			out = append(out, parsed[i])
		}
	}
	return out, v, nil
}

// jobDefs validates the jobs of file (as `validate` does) and turns them
// into definitions for the store, refusing names the configuration file
// already defines and run blocks that allow (the configuration file's
// worker.allow_commands and worker.allow_http_hosts) does not cover.
func jobDefs(file *config.File, fileJobs []onetick.Job, allow config.Allow) ([]onetick.StoredJob, error) {
	if _, err := file.OneTickJobs(); err != nil {
		return nil, usageError{err}
	}
	taken := map[string]bool{}
	for _, j := range fileJobs {
		taken[j.Name] = true
	}
	var problems []string
	out := make([]onetick.StoredJob, 0, len(file.Jobs))
	for _, j := range file.Jobs {
		switch {
		case taken[j.Name]:
			problems = append(problems, fmt.Sprintf("%s:%d: job %q is defined in the configuration file too: a job lives in one place; rename it or remove it from one of them", file.Path, j.Line, j.Name))
			continue
		case j.Run != nil:
			if refused := allow.CheckRun(j.Name, j.Run); refused != nil {
				for _, r := range refused {
					problems = append(problems, fmt.Sprintf("%s:%d: %s", file.Path, j.Run.Line, r))
				}
				continue
			}
		}
		def, err := j.JobDef()
		if err != nil {
			return nil, err
		}
		out = append(out, onetick.StoredJob{Name: j.Name, Def: def})
	}
	if problems != nil {
		return nil, badInput("%s", strings.Join(problems, "\n"))
	}
	return out, nil
}

// allowOf is f's allow-list of run blocks at run time, naming f.
func allowOf(f *config.File) config.Allow {
	a := f.Worker.Allow
	a.Path = f.Path
	return a
}

func printDiff(w io.Writer, set string, d onetick.JobsDiff) {
	verb := "applied"
	if d.DryRun {
		verb = "dry run, nothing changed; would apply"
	}
	fmt.Fprintf(w, "%s set %s (version %d): %d added, %d changed, %d removed, %d unchanged\n", verb, set, d.Version,
		len(d.Added), len(d.Changed), len(d.Removed), len(d.Unchanged))
	for _, l := range []struct {
		sign  string
		names []string
	}{{"+", d.Added}, {"~", d.Changed}, {"-", d.Removed}} {
		for _, n := range l.names {
			fmt.Fprintf(w, "  %s %s\n", l.sign, n)
		}
	}
}

// cmdJobSets runs `jobs apply` and `jobs rm`; plain `jobs` lists.
func cmdJobSets(ctx context.Context, sub string, args []string, env Env) error {
	c := newControlCmd("jobs "+sub, env)
	file := c.fs.String("f", "", "apply: the file whose jobs the set becomes (same syntax and checks as the configuration file)")
	set := c.fs.String("set", "", "the named set of jobs (required)")
	dry := c.fs.Bool("dry-run", false, "apply: show the difference, change nothing")
	pos, err := parseFlags(c.fs, args)
	if err != nil {
		return err
	}
	if *set == "" {
		return badInput("jobs %s: --set is required: the named set of jobs to change", sub)
	}
	var rm []string
	if sub == "rm" {
		if len(pos) == 0 {
			return badInput("jobs rm: name at least one job")
		}
		rm, pos = pos, nil
	} else if *file == "" {
		return badInput("jobs apply: -f FILE is required")
	}
	f, jobs, h, err := c.sf.open(ctx, "jobs "+sub, pos, env)
	if err != nil {
		return err
	}
	defer h.Close()
	js, ok := h.Backend().(onetick.JobStore)
	if !ok {
		return fmt.Errorf("the backend of %s keeps no jobs defined at run time", f.Path)
	}
	var d onetick.JobsDiff
	if sub == "rm" {
		d, err = js.RemoveJobs(ctx, *set, rm)
	} else {
		src, lerr := config.LoadJobs(*file, f)
		if lerr != nil {
			return usageError{lerr}
		}
		defs, derr := jobDefs(src, jobs, allowOf(f))
		if derr != nil {
			return derr
		}
		d, err = js.ApplyJobs(ctx, *set, defs, *dry)
	}
	var in *onetick.InputError
	if errors.As(err, &in) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	return c.print(env.Stdout, d, func() { printDiff(env.Stdout, *set, d) })
}
