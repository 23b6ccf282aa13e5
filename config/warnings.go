package config

import (
	"fmt"

	"github.com/onetick/onetick"
)

// Warnings lists what in f is valid but cannot keep a promise the file
// seems to make: a job's preference and its run block's overlap policy
// that pull apart (the preference decides, see package worker). Each is an
// *Error used as a warning, "FILE:LINE: FIELD: message"; `onetick
// validate` prints them and still exits 0, and `run` runs the file.
func (f *File) Warnings() []*Error {
	var out []*Error
	add := func(i int, j Job, key, format string, args ...any) {
		field := label(i, j.Name) + ".run." + key
		out = append(out, &Error{File: f.Path, Line: f.line(field, j.Run.Line), Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	for i, j := range f.Jobs {
		r := j.Run
		if r == nil {
			continue
		}
		_, overlapWritten := f.lines[label(i, j.Name)+".run.overlap"]
		dup := onetick.Prefer(j.Prefer) == onetick.PreferDuplicate
		catchup := j.MaxCatchup
		if catchup == 0 {
			catchup = DefaultMaxCatchup
		}
		switch {
		case dup && r.Overlap == "skip" && overlapWritten:
			add(i, j, "overlap", "skip does not drop ticks of a job that prefers duplicate: a tick due while a run of the job is in flight waits, and the job's ticks run one at a time in slot order (at most max_catchup, %d, wait; later ones are skipped and counted as missed); write queue to say so, or prefer: missed to skip", catchup)
		case !dup && r.Overlap == "queue":
			add(i, j, "overlap", "queue with prefer: missed: the waiting tick runs when the previous run ends, possibly later than grace (%s) after its slot, and a further tick due meanwhile is skipped and counted as missed; prefer: duplicate runs every slot, in order", j.Grace)
		}
		if dup && r.Overlap != "allow" && r.Timeout == 0 {
			add(i, j, "timeout", "is not set: with prefer: duplicate a run that never ends holds every later tick of the job waiting, and beyond max_catchup (%d) they are skipped and counted as missed; set run.timeout", catchup)
		}
	}
	return out
}
