package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/onetick/onetick"
)

var _ onetick.JobStore = (*Backend)(nil)

// ApplyJobs implements onetick.JobStore, in one transaction.
func (b *Backend) ApplyJobs(ctx context.Context, set string, jobs []onetick.StoredJob, dryRun bool) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	var d onetick.JobsDiff
	err := b.write(ctx, func(o *op) error {
		cur := map[string]onetick.StoredJob{}
		for _, j := range jobs {
			var owner, def string
			switch err := o.row("SELECT set_name, def FROM jobs WHERE name = ?", j.Name).Scan(&owner, &def); {
			case err == nil:
				cur[j.Name] = onetick.StoredJob{Set: owner, Name: j.Name, Def: []byte(def)}
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		rows, err := o.tx.QueryContext(o.ctx, "SELECT name, def FROM jobs WHERE set_name = ?", set)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n, def string
			if err := rows.Scan(&n, &def); err != nil {
				rows.Close()
				return err
			}
			cur[n] = onetick.StoredJob{Set: set, Name: n, Def: []byte(def)}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var write []onetick.StoredJob
		if d, write, err = onetick.DiffJobs(set, jobs, cur); err != nil {
			return err
		}
		d.DryRun = dryRun
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
	if err := onetick.ValidateJobSet(set); err != nil {
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
