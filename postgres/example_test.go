package postgres_test

import (
	"context"
	"log"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/postgres"
)

// A replica opens the backend, migrates the schema (safe when every
// replica does it at start) and runs the scheduler on it.
func ExampleOpen() {
	ctx := context.Background()
	b, err := postgres.Open(ctx, "postgres://onetick@db.internal:5432/onetick", postgres.Options{Schema: "onetick"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	// Any replica may delete what outlived its retention, say once a
	// minute: b.Prune(ctx).
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "a" /* , Jobs: ... */})
	if err != nil {
		log.Fatal(err)
	}
	_ = s.Run(ctx)
	_ = b.WorkerStore("onetick") // the workers' store of the same database
}
