//go:build linux

package executor_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
)

// A command runs once per attempt; its output lines are logged with the
// tick id. The program's main must call executor.MaybeSupervise() first
// (this test binary's TestMain does).
func ExampleCommand() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the example's output stable
			}
			return a
		},
	}))
	cmd, err := executor.NewCommand(executor.CommandConfig{
		Argv:    []string{"echo", "hello from", "onetick"},
		Timeout: time.Minute,
		Logger:  log,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	slot := onetick.Slot(1714543200000)
	err = cmd.Execute(context.Background(), executor.Run{
		Job: "hello", Slot: slot, Tick: onetick.TickID("hello", slot), Epoch: 3, Attempt: 1,
	})
	fmt.Println("error:", err)
	// Output:
	// level=INFO msg=output job=hello tick=hello:1714543200000 stream=stdout line="hello from onetick"
	// error: <nil>
}
