package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/onetick/onetick"
)

var _ onetick.JobStore = (*Backend)(nil)

func validSet(set string) error {
	if set == "" || len(set) > 100 || strings.ContainsAny(set, " \t\n|{}") {
		return &onetick.InputError{Msg: fmt.Sprintf("job set %q: want 1 to 100 characters, no spaces, | or braces", set)}
	}
	return nil
}

// ApplyJobs implements onetick.JobStore, in one transaction.
func (b *Backend) ApplyJobs(ctx context.Context, set string, jobs []onetick.StoredJob, dryRun bool) (onetick.JobsDiff, error) {
	if err := validSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	d := onetick.JobsDiff{DryRun: dryRun, Added: []string{}, Changed: []string{}, Removed: []string{}, Unchanged: []string{}}
	err := b.write(ctx, func(o *op) error {
		keep := make(map[string]bool, len(jobs))
		var write []onetick.StoredJob
		for _, j := range jobs {
			keep[j.Name] = true
			var owner, def string
			err := o.row("SELECT set_name, def FROM jobs WHERE name = ?", j.Name).Scan(&owner, &def)
			switch {
			case err == nil && owner != set:
				return &onetick.InputError{Msg: fmt.Sprintf("job %q belongs to the set %q, not %q: remove it there first, or rename it", j.Name, owner, set)}
			case err == nil && bytes.Equal([]byte(def), j.Def):
				d.Unchanged = append(d.Unchanged, j.Name)
				continue
			case err == nil:
				d.Changed = append(d.Changed, j.Name)
			default:
				d.Added = append(d.Added, j.Name)
			}
			write = append(write, j)
		}
		rows, err := o.tx.QueryContext(o.ctx, "SELECT name FROM jobs WHERE set_name = ?", set)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return err
			}
			if !keep[n] {
				d.Removed = append(d.Removed, n)
			}
		}
		rows.Close()
		for _, l := range [][]string{d.Added, d.Changed, d.Removed, d.Unchanged} {
			sort.Strings(l)
		}
		v, err := o.counter("jobs")
		if err != nil {
			return err
		}
		d.Version = v
		if dryRun || len(write)+len(d.Removed) == 0 {
			return nil
		}
		for _, j := range write {
			if err := o.exec(`INSERT INTO jobs (name, set_name, def, since_ms) VALUES (?, ?, ?, ?)
				ON CONFLICT (name) DO UPDATE SET def = excluded.def, since_ms = excluded.since_ms`, j.Name, set, string(j.Def), o.ms); err != nil {
				return err
			}
		}
		for _, n := range d.Removed {
			if err := o.exec("DELETE FROM jobs WHERE name = ?", n); err != nil {
				return err
			}
		}
		d.Version = v + 1
		return o.setCounter("jobs", v+1)
	})
	if err != nil {
		return onetick.JobsDiff{}, err
	}
	return d, nil
}

// RemoveJobs implements onetick.JobStore.
func (b *Backend) RemoveJobs(ctx context.Context, set string, names []string) (onetick.JobsDiff, error) {
	if err := validSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	d := onetick.JobsDiff{Removed: []string{}}
	err := b.write(ctx, func(o *op) error {
		for _, n := range names {
			res, err := o.tx.ExecContext(o.ctx, "DELETE FROM jobs WHERE name = ? AND set_name = ?", n, set)
			if err != nil {
				return err
			}
			if k, _ := res.RowsAffected(); k > 0 {
				d.Removed = append(d.Removed, n)
			}
		}
		v, err := o.counter("jobs")
		if err != nil {
			return err
		}
		d.Version = v
		if len(d.Removed) > 0 {
			d.Version = v + 1
			return o.setCounter("jobs", v+1)
		}
		return nil
	})
	return d, err
}

// StoredJobs implements onetick.JobStore.
func (b *Backend) StoredJobs(ctx context.Context) ([]onetick.StoredJob, int64, error) {
	var out []onetick.StoredJob
	var v int64
	err := b.read(ctx, func(o *op) error {
		var err error
		if v, err = o.counter("jobs"); err != nil {
			return err
		}
		rows, err := o.tx.QueryContext(o.ctx, "SELECT name, set_name, def, since_ms FROM jobs ORDER BY name")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j onetick.StoredJob
			var def string
			var ms int64
			if err := rows.Scan(&j.Name, &j.Set, &def, &ms); err != nil {
				return err
			}
			j.Def, j.Since = json.RawMessage(def), msTime(ms)
			out = append(out, j)
		}
		return rows.Err()
	})
	return out, v, err
}

// JobsVersion implements onetick.JobStore.
func (b *Backend) JobsVersion(ctx context.Context) (int64, error) {
	var v int64
	err := b.read(ctx, func(o *op) error {
		var err error
		v, err = o.counter("jobs")
		return err
	})
	return v, err
}
