// Command check judges the history of a chaos run (issue 22):
//
//	go run ./internal/chaos/cmd/check [-v] [-json] HISTORY.jsonl
//
// It prints the report of chaos.Check and exits 0 when the history holds
// no violation, 1 when it does, 2 when the file cannot be read or parsed
// (the error names the file and line) or the usage is wrong. -v prints the
// window of history of the documented cases too; -json prints the report
// as JSON instead. "-" reads the history from standard input.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/onetick/onetick/internal/chaos"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command, testable: its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "print the window of history of documented cases too")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: check [-v] [-json] HISTORY.jsonl (or - for standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	name := fs.Arg(0)
	events, err := read(name, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "check: %s: %v\n", name, err)
		return 2
	}
	r := chaos.Check(events)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.Print(stdout, chaos.PrintOptions{Windows: *verbose})
	}
	if err != nil {
		fmt.Fprintf(stderr, "check: writing the report: %v\n", err)
		return 2
	}
	if !r.OK() {
		return 1
	}
	return 0
}

func read(name string, stdin io.Reader) ([]chaos.Event, error) {
	if name == "-" {
		return chaos.Read(stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return chaos.Read(f)
}
