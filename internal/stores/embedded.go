package stores

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/sqlite"
)

// Embedded says which embedded store a configuration without a shared
// store uses: the in-process one (inMemory, backend.memory) or the
// durable file at data, backend.file.path or the default path (getenv is
// os.Getenv in production). Its errors are *InvalidError.
func Embedded(f *config.File, data string, inMemory bool, getenv func(string) string) (path string, mem bool, err error) {
	if inMemory || f.Backend.Memory {
		if data != "" {
			return "", false, invalid(errors.New("--data and the in-process store (--memory, backend.memory) exclude each other"))
		}
		return "", true, nil
	}
	switch {
	case data != "":
		return data, false, nil
	case f.Backend.File != nil && f.Backend.File.Path != "":
		return f.Backend.File.Path, false, nil
	}
	p, err := sqlite.DefaultPath(getenv)
	if err != nil {
		return "", false, invalid(err)
	}
	return p, false, nil
}

// Exposed lists, as warnings, what of the file store at path others than
// its owner can reach (nothing for what does not exist yet): a stat, not
// an open.
func Exposed(path string) []string {
	var out []string
	for _, x := range sqlite.Exposed(path) {
		out = append(out, x.String())
	}
	return out
}

// openFile opens the durable file store at o.Path; its notices (such as
// a file others can read) go to o.Logger.
func openFile(o Options) (*Handle, error) {
	b, err := sqlite.Open(o.Path, sqlite.Options{Logger: o.Logger, Ledger: o.ledger})
	if err != nil {
		return nil, err
	}
	h := &Handle{backend: b, close: b.Close,
		desc:     Description{Kind: File, Path: b.Path()},
		work:     func(group string) WorkStore { return b.WorkerStore(group) },
		describe: func(context.Context) string { return "embedded (file " + b.Path() + ")" },
		announce: func(_ context.Context, log *slog.Logger) {
			log.Info("using the durable file store: one host, state survives a restart; ticks go to standard output as JSON lines",
				"file", b.Path())
		},
	}
	if o.Stdout != nil {
		h.sink = &stdoutSink{w: o.Stdout}
	}
	return h, nil
}

// openMemory builds the in-process store.
func openMemory(o Options) *Handle {
	b := memory.New(memory.Options{Ledger: o.ledger})
	h := &Handle{backend: b, close: b.Close,
		desc:     Description{Kind: Memory},
		work:     func(group string) WorkStore { return b.WorkerStore(group) },
		viewWork: viewWorkStore[*memory.Backend, *memory.WorkerStore](Memory),
		describe: func(context.Context) string { return "embedded (in-process)" },
		announce: func(_ context.Context, log *slog.Logger) {
			log.Warn("using the in-process store (--memory): state is lost on exit; ticks go to standard output as JSON lines")
		},
	}
	if o.Stdout != nil {
		h.sink = &stdoutSink{w: o.Stdout}
	}
	return h
}

// stdoutSink writes each tick as one JSON line: the embedded stores'
// destination.
type stdoutSink struct {
	mu sync.Mutex
	w  io.Writer
}

type tickLine struct {
	Job      string          `json:"job"`
	Slot     onetick.Slot    `json:"slot"`
	SlotTime string          `json:"slot_time"`
	Tick     string          `json:"tick"`
	Epoch    onetick.Epoch   `json:"epoch"`
	Replica  string          `json:"replica"`
	Payload  json.RawMessage `json:"payload"`
}

func (s *stdoutSink) Deliver(_ context.Context, ticks []onetick.TickRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	enc := json.NewEncoder(s.w)
	for _, t := range ticks {
		if err := enc.Encode(tickLine{Job: t.Job, Slot: t.Slot, SlotTime: t.Slot.String(), Tick: t.Tick,
			Epoch: t.Epoch, Replica: t.Replica, Payload: json.RawMessage(t.Payload)}); err != nil {
			return err
		}
	}
	return nil
}
