package etcd

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/onetick/onetick"
)

var _ onetick.JobStore = (*Backend)(nil)

// Jobs defined at run time: one key per job (jobs/<name>, a StoredJob as
// JSON) and the version (jobsver), changed together in one transaction
// that compares the whole jobs/ range it read.

func (b *Backend) jobsPrefix() string { return b.k("jobs/") }

// readJobs reads every stored job and the version in t.
func (b *Backend) readJobs(t *otx) (map[string]onetick.StoredJob, int64, error) {
	kvs, err := t.scan(b.jobsPrefix(), prefixEnd(b.jobsPrefix()), 0, true)
	if err != nil {
		return nil, 0, err
	}
	cur := make(map[string]onetick.StoredJob, len(kvs))
	for _, kv := range kvs {
		var j onetick.StoredJob
		if json.Unmarshal([]byte(kv.val), &j) == nil {
			cur[j.Name] = j
		}
	}
	v, _, err := t.get(b.k("jobsver"))
	if err != nil {
		return nil, 0, err
	}
	ver, _ := parseInt(v)
	return cur, ver, nil
}

// ApplyJobs implements onetick.JobStore.
func (b *Backend) ApplyJobs(ctx context.Context, set string, jobs []onetick.StoredJob, dryRun bool) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	var d onetick.JobsDiff
	err := b.update(ctx, "apply jobs", func(t *otx) error {
		now := b.opts.Clock.Now()
		cur, ver, err := b.readJobs(t)
		if err != nil {
			return err
		}
		var write []onetick.StoredJob
		d, write, err = onetick.DiffJobs(set, jobs, cur)
		if err != nil {
			return err
		}
		d.DryRun = dryRun
		if !dryRun && len(write)+len(d.Removed) > 0 {
			for _, j := range write {
				t.put(b.jobsPrefix()+esc(j.Name), jsonOf(onetick.StoredJob{Set: set, Name: j.Name, Def: j.Def, Since: now.UTC()}))
			}
			for _, name := range d.Removed {
				t.del(b.jobsPrefix() + esc(name))
			}
			ver++
			t.put(b.k("jobsver"), strconv.FormatInt(ver, 10))
		}
		d.Version = ver
		return nil
	})
	return d, err
}

// RemoveJobs implements onetick.JobStore.
func (b *Backend) RemoveJobs(ctx context.Context, set string, names []string) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	var d onetick.JobsDiff
	err := b.update(ctx, "remove jobs", func(t *otx) error {
		cur, ver, err := b.readJobs(t)
		if err != nil {
			return err
		}
		d = onetick.JobsDiff{Removed: []string{}}
		for _, n := range names {
			if j, ok := cur[n]; ok && j.Set == set {
				t.del(b.jobsPrefix() + esc(n))
				d.Removed = append(d.Removed, n)
			}
		}
		if len(d.Removed) > 0 {
			ver++
			t.put(b.k("jobsver"), strconv.FormatInt(ver, 10))
		}
		d.Version = ver
		return nil
	})
	return d, err
}

// StoredJobs implements onetick.JobStore.
func (b *Backend) StoredJobs(ctx context.Context) ([]onetick.StoredJob, int64, error) {
	var out []onetick.StoredJob
	var ver int64
	err := b.update(ctx, "stored jobs", func(t *otx) error {
		cur, v, err := b.readJobs(t)
		if err != nil {
			return err
		}
		out, ver = make([]onetick.StoredJob, 0, len(cur)), v
		for _, kv := range sortedNames(cur) {
			out = append(out, cur[kv])
		}
		return nil
	})
	return out, ver, err
}

// JobsVersion implements onetick.JobStore.
func (b *Backend) JobsVersion(ctx context.Context) (int64, error) {
	if err := b.check(ctx); err != nil {
		return 0, err
	}
	resp, err := b.c.Get(ctx, b.k("jobsver"))
	if err != nil {
		return 0, err
	}
	return versionOf(resp.Kvs), nil
}

func sortedNames(m map[string]onetick.StoredJob) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
