package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onetick/onetick/sqlite"
)

// TestJobsApplyNeedsAList: `jobs apply -f` with an empty file, a file of
// comments or jobs: null exits 2 and changes nothing (it once emptied the
// set); jobs: [] empties it.
func TestJobsApplyNeedsAList(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "onetick.db")
	b, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	cfg := writeConfig(t, "jobs:\n  - {name: a, schedule: \"@every 1h\"}\n")
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append(args, "--config", cfg, "--data", db), Env{Stdout: &out, Stderr: &errOut})
		return code, out.String(), errOut.String()
	}
	file := func(body string) string {
		p := filepath.Join(dir, "set.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if code, out, stderr := run("jobs", "apply", "--set", "s", "-f", file("jobs:\n  - {name: t1, schedule: \"@every 1h\"}\n")); code != 0 || !strings.Contains(out, "1 added") {
		t.Fatalf("apply: %d %q %q", code, out, stderr)
	}
	for _, body := range []string{"", "# nothing yet\n", "jobs:\n", "jobs: null\n"} {
		code, out, stderr := run("jobs", "apply", "--set", "s", "-f", file(body))
		if code != 2 || out != "" || !strings.Contains(stderr, filepath.Join(dir, "set.yaml")) || !strings.Contains(stderr, "jobs: []") {
			t.Errorf("apply %q: %d %q %q, want exit 2 naming the file and jobs: []", body, code, out, stderr)
		}
	}
	if code, out, _ := run("jobs", "--json"); code != 0 || !strings.Contains(out, `"t1"`) {
		t.Fatalf("after the refused applies: %d %s", code, out)
	}
	if code, out, stderr := run("jobs", "apply", "--set", "s", "-f", file("jobs: []\n")); code != 0 || !strings.Contains(out, "1 removed") {
		t.Fatalf("jobs: []: %d %q %q", code, out, stderr)
	}
}
