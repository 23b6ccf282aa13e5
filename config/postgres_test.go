package config

import "testing"

var postgresErrCases = []errCase{
	{name: "postgres without url", yaml: "backend:\n  postgres: {schema: s}\n",
		want: []want{{2, "backend.postgres.url", "is required"}}},
	{name: "postgres not a URL", yaml: "backend:\n  postgres:\n    url: host=db user=u password=hunter2\n",
		secret: "hunter2", want: []want{{3, "backend.postgres.url", "want a URL postgres://"}}},
	{name: "postgres bad schema", yaml: "backend:\n  postgres:\n    url: postgres://u@h/db\n    schema: Bad-Name\n",
		want: []want{{4, "backend.postgres.schema", "want lower-case letters"}}},
	{name: "postgres negative tolerance", yaml: "backend:\n  postgres:\n    url: postgres://u@h/db\n    clock_tolerance: -1s\n",
		want: []want{{4, "backend.postgres.clock_tolerance", "must not be negative"}}},
	{name: "postgres unknown key", yaml: "backend:\n  postgres:\n    url: postgres://u@h/db\n    pool: 3\n",
		want: []want{{4, "backend.postgres.pool", "unknown"}}},
	{name: "postgres and redis", yaml: "backend:\n  redis: {url: 'redis://h:6379'}\n  postgres: {url: 'postgres://u@h/db'}\n",
		want: []want{{1, "backend", "give one of redis, postgres, etcd, file and memory"}}},
	{name: "postgres password not in messages", yaml: "backend:\n  postgres:\n    url: postgres://u:s3cr3tpw@h/db\n    schema: [x]\n",
		secret: "s3cr3tpw", want: []want{{4, "backend.postgres.schema", "must be a string"}}},
}

func TestPostgresErrors(t *testing.T) { checkCases(t, postgresErrCases) }

func TestPostgresParse(t *testing.T) {
	f := mustParse(t, "backend:\n  postgres:\n    url: ${PG_URL}\n    entry_retention: 168h\n",
		envMap(map[string]string{"PG_URL": "postgres://onetick:pw@db:5432/app?sslmode=verify-full"}))
	pg := f.Backend.Postgres
	if pg == nil || pg.Schema != "onetick" || pg.ClockTolerance.D() != DefaultClockTolerance || !f.Shared() {
		t.Fatalf("postgres %+v", pg)
	}
	if m := f.MaskedStore(); m != "postgres postgres://onetick:xxxxx@db:5432/app?sslmode=verify-full schema onetick" {
		t.Fatalf("masked %q", m)
	}
	if o := f.PostgresOptions(); o.Schema != "onetick" || o.EntryRetention.Hours() != 168 {
		t.Fatalf("options %+v", o)
	}
}
