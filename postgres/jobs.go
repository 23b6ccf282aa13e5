package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
)

var _ onetick.JobStore = (*Backend)(nil)

// ApplyJobs implements onetick.JobStore, in one transaction that locks the
// version row, so concurrent applies are serialized.
func (b *Backend) ApplyJobs(ctx context.Context, set string, jobs []onetick.StoredJob, dryRun bool) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	var d onetick.JobsDiff
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, b.q(`INSERT INTO {s}.jobs_version (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`)); err != nil {
			return err
		}
		var version int64
		if err := tx.QueryRow(ctx, b.q(`SELECT version FROM {s}.jobs_version WHERE id = 1 FOR UPDATE`)).Scan(&version); err != nil {
			return err
		}
		names := make([]string, len(jobs))
		for i, j := range jobs {
			names[i] = j.Name
		}
		cur := map[string]onetick.StoredJob{}
		rows, err := tx.Query(ctx, b.q(`SELECT name, set_name, def FROM {s}.jobs WHERE name = ANY($1) OR set_name = $2`), names, set)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n, s, def string
			if err := rows.Scan(&n, &s, &def); err != nil {
				rows.Close()
				return err
			}
			cur[n] = onetick.StoredJob{Set: s, Name: n, Def: []byte(def)}
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
		writeN, writeD := make([]string, len(write)), make([]string, len(write))
		for i, j := range write {
			writeN[i], writeD[i] = j.Name, string(j.Def)
		}
		d.Version = version
		if dryRun || len(writeN)+len(d.Removed) == 0 {
			return nil
		}
		if len(writeN) > 0 {
			if _, err := tx.Exec(ctx, b.q(`INSERT INTO {s}.jobs (name, set_name, def, since_ms)
				SELECT n, $3, d, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM unnest($1::text[], $2::text[]) AS t(n, d)
				ON CONFLICT (name) DO UPDATE SET def = excluded.def, since_ms = excluded.since_ms`), writeN, writeD, set); err != nil {
				return err
			}
		}
		if len(d.Removed) > 0 {
			if _, err := tx.Exec(ctx, b.q(`DELETE FROM {s}.jobs WHERE name = ANY($1)`), d.Removed); err != nil {
				return err
			}
		}
		d.Version = version + 1
		_, err = tx.Exec(ctx, b.q(`UPDATE {s}.jobs_version SET version = $1 WHERE id = 1`), d.Version)
		return err
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
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, b.q(`INSERT INTO {s}.jobs_version (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`)); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, b.q(`SELECT version FROM {s}.jobs_version WHERE id = 1 FOR UPDATE`)).Scan(&d.Version); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, b.q(`DELETE FROM {s}.jobs WHERE name = ANY($1) AND set_name = $2 RETURNING name`), names, set)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return err
			}
			d.Removed = append(d.Removed, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		sort.Strings(d.Removed)
		if len(d.Removed) == 0 {
			return nil
		}
		d.Version++
		_, err = tx.Exec(ctx, b.q(`UPDATE {s}.jobs_version SET version = $1 WHERE id = 1`), d.Version)
		return err
	})
	return d, err
}

// StoredJobs implements onetick.JobStore (one snapshot: a repeatable-read
// transaction).
func (b *Backend) StoredJobs(ctx context.Context) ([]onetick.StoredJob, int64, error) {
	var out []onetick.StoredJob
	var v int64
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, b.q(`SELECT coalesce((SELECT version FROM {s}.jobs_version WHERE id = 1), 0)`)).Scan(&v); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, b.q(`SELECT name, set_name, def, since_ms FROM {s}.jobs ORDER BY name`))
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
	err := b.pool.QueryRow(ctx, b.q(`SELECT coalesce((SELECT version FROM {s}.jobs_version WHERE id = 1), 0)`)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}
