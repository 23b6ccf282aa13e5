package memory

import (
	"context"
	"sort"

	"github.com/onetick/onetick"
)

var _ onetick.JobStore = (*Backend)(nil)

// storedJobs is the memory backend's run-time job definitions.
type storedJobs struct {
	byName  map[string]onetick.StoredJob
	version int64
}

// ApplyJobs implements onetick.JobStore.
func (b *Backend) ApplyJobs(ctx context.Context, set string, jobs []onetick.StoredJob, dryRun bool) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.JobsDiff{}, err
	}
	defer b.mu.Unlock()
	if b.jobs.byName == nil {
		b.jobs.byName = map[string]onetick.StoredJob{}
	}
	d, write, err := onetick.DiffJobs(set, jobs, b.jobs.byName)
	if err != nil {
		return onetick.JobsDiff{}, err
	}
	d.DryRun = dryRun
	if !dryRun && len(write)+len(d.Removed) > 0 {
		for _, j := range write {
			b.jobs.byName[j.Name] = onetick.StoredJob{Set: set, Name: j.Name, Def: append([]byte(nil), j.Def...), Since: now.UTC()}
		}
		for _, name := range d.Removed {
			delete(b.jobs.byName, name)
		}
		b.jobs.version++
	}
	d.Version = b.jobs.version
	return d, nil
}

// RemoveJobs implements onetick.JobStore.
func (b *Backend) RemoveJobs(ctx context.Context, set string, names []string) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	if _, err := b.lock(ctx); err != nil {
		return onetick.JobsDiff{}, err
	}
	defer b.mu.Unlock()
	d := onetick.JobsDiff{Removed: []string{}}
	for _, n := range names {
		if j, ok := b.jobs.byName[n]; ok && j.Set == set {
			delete(b.jobs.byName, n)
			d.Removed = append(d.Removed, n)
		}
	}
	if len(d.Removed) > 0 {
		b.jobs.version++
	}
	d.Version = b.jobs.version
	return d, nil
}

// StoredJobs implements onetick.JobStore.
func (b *Backend) StoredJobs(ctx context.Context) ([]onetick.StoredJob, int64, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, 0, err
	}
	defer b.mu.Unlock()
	out := make([]onetick.StoredJob, 0, len(b.jobs.byName))
	for _, j := range b.jobs.byName {
		out = append(out, j)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out, b.jobs.version, nil
}

// JobsVersion implements onetick.JobStore.
func (b *Backend) JobsVersion(ctx context.Context) (int64, error) {
	if _, err := b.lock(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	return b.jobs.version, nil
}
