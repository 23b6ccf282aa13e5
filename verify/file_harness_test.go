//go:build verify

package verify

// Fleets on the embedded file store: several `onetick run` processes on
// one SQLite file (backend: file), one leading at a time, every one
// working; the test reads the file with the sqlite package, as the
// operator's commands do from another process while the daemons run.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/onetick/onetick/sqlite"
)

// NewFileFleet prepares a fleet for scenario on a fresh file store:
// yaml, a configuration built on fleetYAML, with its backend section
// replaced by the file's. The first process started creates the file.
func NewFileFleet(t *testing.T, scenario, yaml string) *Fleet {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "onetick.db")
	cfg := filepath.Join(dir, "onetick.yaml")
	if err := os.WriteFile(cfg, []byte(onBackend(yaml, "backend:\n  file:\n    path: "+path+"\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &Fleet{t: t, Scenario: scenario, cfgPath: cfg, bus: newBus(), filePath: path, final: map[*Replica]Metrics{}}
	t.Cleanup(f.close)
	return f
}

// fileStore opens the fleet's file on first use (once a process has
// created it), failing the test if it cannot.
func (f *Fleet) fileStore() *sqlite.Backend {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.file == nil {
		b, err := sqlite.Open(f.filePath, sqlite.Options{})
		if err != nil {
			f.t.Fatalf("opening the fleet's file store: %v", err)
		}
		f.file = b
	}
	return f.file
}
