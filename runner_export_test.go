package onetick

// JobStatesHeld returns, per shard, how many jobs' state (configured and
// run-time) the scheduler's runner holds, and how many configured jobs
// are the shard's. Only while no term runs: before Run, or after it
// returned.
func (s *Scheduler) JobStatesHeld() (held, defs []int) {
	for _, r := range s.runners {
		held = append(held, len(r.jobs)+len(r.dyn)+len(r.fileJob))
		defs = append(defs, len(r.defs))
	}
	return held, defs
}
