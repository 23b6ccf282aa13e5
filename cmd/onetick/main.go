// Command onetick runs a highly available periodic-job scheduler replica.
// See the README, or `onetick help`.
package main

import (
	"context"
	"os"

	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/internal/cli"
)

func main() {
	// The command executor re-executes this program as the supervisor of
	// each command it runs; that process must do nothing else.
	executor.MaybeSupervise()
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}
