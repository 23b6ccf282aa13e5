// Package config reads onetick's YAML configuration file.
//
// Load (or Parse) reads the file, expands environment variables, decodes it
// strictly, applies the defaults and validates everything, returning every
// problem at once as Errors, one *Error per problem, in file order, each
// formatted "FILE:LINE: FIELD: MESSAGE":
//
//	onetick.yaml:9: lease.renew: 8s must be below half the ttl (7.5s): ...
//	onetick.yaml:14: jobs[0] (nightly-billing).schedule: cron: "0 0 30 2 *": day-of-month: no fire time within 5 years
//
// # Format
//
//	backend:                 # optional; absent: the durable file store at its default path
//	  file: {path: ""}       # the durable file store (one host); default path in the README
//	  memory: {}             # the in-process store: state lost on exit (tests, demos)
//	  redis:                 # or a Redis (at most one of file, memory, redis, postgres, etcd)
//	    url: redis://127.0.0.1:6379/0   # redis:// or rediss:// (TLS); required unless sentinel or cluster
//	    prefix: onetick                 # key prefix; default onetick ({onetick} in a cluster)
//	    username: ""                    # optional; overrides the URL's
//	    password: ${REDIS_PASSWORD}     # optional; overrides the URL's
//	    clock_tolerance: 100ms          # default 100ms
//	    sentinel:                       # optional, instead of url: a Sentinel-managed primary
//	      primary: mymaster             # required
//	      addrs: [h1:26379, h2:26379]   # required; the sentinels
//	      username: ""                  # the sentinels' own credentials
//	      password: ${SENTINEL_PASSWORD}
//	    cluster:                        # optional, instead of url: a Redis Cluster
//	      addrs: [h1:7000, h2:7000]     # required; seed nodes
//	    durability: async               # async (default) or replicated (WAIT after acquire, renew, claim)
//	    replicas: 1                     # replicated: replicas that must acknowledge; default 1
//	    replication_timeout: 100ms      # replicated: how long WAIT waits
//	    tls:                            # optional
//	      enabled: false                # implied by rediss://
//	      ca_file: ""                   # PEM CAs to trust instead of the system's
//	      cert_file: ""                 # PEM client certificate ...
//	      key_file: ""                  # ... and its key (both or neither)
//	      server_name: ""               # default the URL's host
//	      insecure_skip_verify: false
//	  postgres:                         # or PostgreSQL
//	    url: postgres://onetick:${PGPASSWORD}@db:5432/app?sslmode=verify-full  # required; postgres:// or postgresql://
//	    schema: onetick                 # onetick's tables; default onetick
//	    river_schema: river             # where River's tables are, for relay: river; default the search_path
//	    clock_tolerance: 100ms          # default 100ms
//	    entry_retention: 0s             # delete stream entries older than this; default 0: kept
//	  etcd:                             # or an etcd cluster (docs/etcd.md)
//	    endpoints: [http://e1:2379, http://e2:2379]  # required; http:// or https:// (TLS), no credentials
//	    prefix: onetick/                # key prefix; default onetick/
//	    username: onetick               # optional: etcd RBAC user ...
//	    password: ${ETCD_PASSWORD}      # ... and password
//	    clock_tolerance: 100ms          # default 100ms; judged by the replica's own clock
//	    max_txn_ops: 128                # the servers' --max-txn-ops; default 128
//	    tls:                            # optional; the keys of backend.redis.tls
//	      enabled: false                # implied by https:// endpoints
//	      ca_file: ""
//	      cert_file: ""
//	      key_file: ""
//	      server_name: ""               # default the first endpoint's host
//	      insecure_skip_verify: false
//	lease:
//	  ttl: 15s                 # default 15s; at least 10ms
//	  renew: 5s                # default ttl/3; must be below ttl/2
//	  safety_margin: 1.5s      # default ttl/10; ttl - safety_margin must exceed renew
//	http:
//	  listen: 127.0.0.1:9464   # default 127.0.0.1:9464 (loopback); "off" disables
//	  token: ${ONETICK_HTTP_TOKEN} # bearer token for API changes (and reads from outside
//	                           # loopback); at least 16 bytes; absent: the API is read-only,
//	                           # and a listener off loopback serves no status or API reads
//	  allowed_hosts: [onetick.internal] # names (or IP addresses), no port, the Host header of
//	                           # the status, the page and the API may carry besides the listener's own
//	  tls:                     # optional: HTTPS
//	    cert_file: server.pem  # PEM certificate (chain) ...
//	    key_file: server-key.pem # ... and its key (both or neither); read again when they change
//	  read_timeout: 1m         # default 1m: headers and body of a request (headers: at most 10s)
//	  write_timeout: 2m        # default 2m or 2×read_timeout, whichever is longer; must exceed read_timeout
//	  idle_timeout: 1m         # default 1m: a keep-alive connection without a request is closed
//	  max_connections: 128     # default 128: served at once, more wait
//	role: both                 # both (default), scheduler or worker: what this replica does
//	shards: 1                  # default 1 (1 to 256): shards the jobs are spread over (docs/shards.md);
//	                           # above 1 refused until the engine schedules per shard (issue 23)
//	worker:                    # the worker half: runs the jobs that have a run block
//	  group: onetick           # default onetick: the workers' group in the store; no spaces
//	  concurrency: 10          # default 10 (at most 10000): runs at once
//	  takeover_idle: 30s       # default 30s; at least 100ms: the backstop for an entry
//	                           # without a heartbeat that long, though its worker lives
//	  heartbeat: 1s            # default 1s, or takeover_idle/3 if shorter; at most takeover_idle/3
//	  done_retention: 24h      # default 24h; at least takeover_idle: how long done records are kept
//	  max_deliveries: 10       # default 10 (at most 1000): deliveries without result, then dead letter
//	  shutdown_timeout: 8s     # default 8s: how long runs in flight may finish at shutdown
//	  allow_commands: [/usr/local/bin/report, /opt/hooks/] # what jobs defined at run time may run:
//	  allow_http_hosts: [hooks.internal, "*.example.com"]  # programs (a directory ends in /), hosts
//	                           # (host, host:port, *.domain); default none: no run blocks at run time
//	metrics:                   # which jobs get their own series; fleet totals count every job
//	  per_job: auto            # auto (default): all jobs while at most per_job_limit, else the listed;
//	                           # all, listed or none
//	  per_job_limit: 1000      # default 1000; only with auto
//	  jobs: [nightly-billing]  # names of configured jobs, each once; with auto and listed
//	ledger:                    # the run ledger: every slot's fate (onetick runs, onetick why)
//	  max_age: 168h            # default 168h (7 days); at least 1m: older slots' records go
//	  max_per_job: 1000        # default 1000 (at most 1000000): a job's newest records kept
//	  off: false               # default false; true keeps no ledger
//	deadlines:                 # the leader's watch of the jobs' deadlines (needs the ledger)
//	  check_every: 10s         # default 10s; 1s to 1h
//	  lookback: 1m             # default 1m (at most 24h): records read past the longest deadline
//	  notify:                  # optional: each change of a job's state (late, ok) to a webhook
//	    url: https://alerts.internal/onetick # required
//	    secrets: [${DEADLINE_WEBHOOK_SECRET}] # required; whsec_<base64>, several while rotating
//	    timeout: 10s           # default 10s; at most 5m
//	tracing:                   # a trace per tick to an OpenTelemetry collector; off without the section
//	  otlp_endpoint: http://127.0.0.1:4318 # required: OTLP/HTTP (protobuf) URL; no path: /v1/traces
//	  headers: {authorization: "Bearer ${OTLP_TOKEN}"} # sent with each export; never logged
//	  sample_ratio: 1          # default 1 (0 to 1): share of ticks traced, decided by the tick id
//	  service_name: onetick    # default onetick: service.name, and part of every trace id
//	  timeout: 10s             # default 10s (100ms to 5m): one export with its retries; the last flush
//	relays:                    # named connections for jobs' relays (docs/relays.md); a job applied at
//	                           # run time (jobs apply, the API) names one, never an address or credential
//	  nats:                    # NATS JetStream connections, by name
//	    events:                # the connection's name: letters, digits, _ and -; at most 64
//	      url: nats://nats:4222 # required; several separated by commas; nats://, tls://, ws://, wss://
//	      stream: TICKS        # optional: the stream every publish must land in (JetStream refuses a subject another stream holds)
//	      per_subject: false   # true: one subject per tick, on a stream with max_msgs_per_subject 1, discard new per subject
//	      token: ${NATS_TOKEN} # optional; or creds: /etc/nats/onetick.creds, not both; never printed
//	      creds: ""
//	      subjects: ["ticks.>"] # subject patterns jobs may publish to; required for jobs applied at run time, checked for every job when set
//	jobs:
//	  - name: nightly-billing        # required, unique; no spaces, at most 200 bytes
//	    schedule: "0 2 * * *"        # required; see package cron
//	    timezone: Europe/Berlin      # IANA zone; default UTC ("Local" is refused)
//	    prefer: missed               # missed (default) or duplicate
//	    grace: 30s                   # default 2×ttl; only with prefer: missed; below 1s acts as 1s
//	    max_catchup: 100             # default 100
//	    stream: billing:jobs         # default <prefix>:stream:<name>
//	    max_len: 10000               # approximate stream trimming; default 0 (none)
//	    payload: {task: billing.run} # any YAML value, stored as compact JSON; default {}
//	    run:                         # optional: the work a worker runs once per tick (see below)
//	      command:                   # a program (or command: [argv...]); or http, one of the two
//	        argv: [/usr/local/bin/report, --nightly] # required; no shell unless you name one
//	        env: {REPORT_DIR: /var/reports} # added to the command's environment
//	        dir: /var/reports        # working directory; default onetick's
//	        kill_grace: 10s          # default 10s: from SIGTERM to SIGKILL of the process group
//	      http:                      # a call signed per Standard Webhooks
//	        method: POST             # default POST
//	        url: https://crm.internal/hooks/sync # required
//	        headers: {X-Team: growth}
//	        secrets: [${CRM_WEBHOOK_SECRET}] # required; whsec_<base64>, several while rotating
//	      timeout: 30m               # one attempt; default none for a command, 30s for http
//	      max_attempts: 3            # default 3 (at most 1000); then the tick is a dead letter
//	      backoff: 1s                # default 1s: the first retry's delay, doubling with jitter ...
//	      max_backoff: 10m           # ... up to this; default 10m
//	      overlap: skip              # skip (default), queue or allow: a tick due while a run is in flight
//	    deadline:                    # optional: each slot must have ...
//	      start: 5m                  # ... started within this of its time (at least 1s) ...
//	      finish: 1h                 # ... and succeeded within this (at least start); either may be left out
//	    relay:                       # optional, instead of run: hand each tick to a queue you run (docs/relays.md)
//	      river:                     # backend postgres: a River job inserted in the claim's transaction; or asynq
//	        queue: reports           # default "default"
//	        kind: report             # the River job's kind; default the job's name
//	        max_attempts: 5          # River's max_attempts; default River's (25)
//	      asynq:                     # backend redis: an asynq task written in the claim's script
//	        queue: reports           # default "default"
//	        type: report             # the task's type; default the job's name
//	        max_retry: 4             # asynq's MaxRetry; or max_attempts (max_retry + 1), not both
//	        max_attempts: 5
//	        retention: 24h           # how long asynq keeps a done task's id; default the tick's retention
//	      nats:                      # any backend: the worker's relay consumer publishes each tick to JetStream
//	        connection: events       # a connection of relays.nats (required in a job applied at run time); or:
//	        url: nats://nats:4222    # the address inline (configuration file only); several separated by commas
//	        subject: ticks.report    # required; with per_subject the prefix of <subject>.<job>.<slot ms>
//	        stream: TICKS            # inline only, optional: the stream each publish must land in
//	        per_subject: false       # inline only; true: one subject per tick (as the connection's)
//	        token: ${NATS_TOKEN}     # inline only, optional; or creds: /etc/nats/onetick.creds, not both
//	        creds: ""
//
// The relays section names connections once, with their addresses and
// credentials; a job's relay names one (relay.nats.connection) and gives
// its subject. A job applied at run time must: its definition, kept in
// the store, never holds an address or a credential, it cannot name a
// connection the configuration file does not define, and each worker
// looks the name up in its own file.
//
// The role, the worker section and a job's run block configure the
// workers; the README's "Run your code once" shows them at work, and
// packages worker and executor document what they do. allow_commands and
// allow_http_hosts (Allow) are what jobs defined at run time may run:
// empty by default, which refuses every run block at run time.
//
// Every section and field is optional unless marked required; an empty file
// is valid (no jobs, embedded backend). A jobs file (ParseJobs, for `onetick
// jobs apply` and the HTTP API) is not: it must hold a jobs: list, and
// jobs: [] empties a set. Unknown fields are errors. A field set to null
// (or left empty, as in "grace:") counts as absent, and so does 0 for
// grace, max_catchup, per_job_limit, clock_tolerance, the http timeouts and
// max_connections, and "" for the strings with a default, except
// http.listen, where "" is an error: write off to disable the server.
//
// The metrics section bounds the size of a scrape: each job's own series
// cost about 450 bytes of every scrape of /metrics, so a fleet of 100,000
// jobs would send 44 MB each time. By default jobs beyond the 1,000th get
// no series of their own (the replica says so in its log at start), only
// those listed; the fleet totals, which the shipped alerts read, count
// every job.
//
// Durations use Go syntax with a unit: 15s, 1m30s, 250ms. A bare number
// such as 15 is an error (only 0 is accepted without a unit).
//
// The schedule is a cron expression or descriptor as documented in package
// cron ("0 2 * * *", "*/15 * * * * *", "@daily", "@every 1h +15m",
// "H H * * *", "0 18 * * 5L"). Quote it: a YAML value may not start with @
// or *. Cron fields are matched in the job's timezone. H is hashed from the
// job's name, so jobs with the same schedule spread out, and renaming a job
// moves its H values.
//
// The payload may be any YAML value. It is converted to compact JSON with
// mapping keys in file order; mapping keys must be strings, and .inf and
// .nan are refused. Null gives the default {}. At most 1 MiB.
//
// YAML anchors, aliases and merge keys (<<) may be used, for example to
// share settings between jobs.
//
// # Environment variables
//
// ${VAR} in a value is replaced by the environment variable VAR; it is an
// error if VAR is not set. A jobs file from a client (ParseRequestJobs, the
// HTTP API) reads no environment: a reference in it is an error. ${VAR:-default} gives default when VAR is unset
// or empty. $${ stands for a literal ${. References may be written
// anywhere a plain value can, also inside {...} and [...], but a reference
// cannot span lines.
//
// A variable's content can never change the file's structure: the
// references are set aside before the YAML is parsed and filled into the
// parsed values, so a password may contain "#", ": " or quotes, or start
// with "*", and needs no quoting. An unquoted value is typed after
// expansion (max_len: ${MAX_LEN} reads a number, payload: {n: ${N}} gives
// a JSON number), a quoted one stays a string. A variable cannot supply
// structure: payload: ${JSON} gives a JSON string. References in comments
// and in fields that are reported as unknown are never looked up.
//
// # Secrets
//
// No error message contains a password, a token or a webhook secret of the
// file. RedisURL returns the URL with credentials for connecting;
// MaskedRedisURL, MaskedPostgresURL and MaskedStore return the addresses
// for logs, errors and status, masked by the one function that masks every
// address onetick shows (internal/redact): the password of the user
// information, the value of every query parameter but the known harmless
// ones (sslmode, db, application_name, ...), the values of a keyword/value
// string, whatever precedes an @ in a Sentinel or Cluster address (which
// the file refuses anyway: credentials go in username and password).
//
// # Run blocks
//
// A job's run block is checked by its executor's own checks
// (executor.CommandConfig.Validate, executor.HTTPConfig.Validate, which
// executor.NewCommand and executor.NewHTTP call) while the file is read,
// and what they refuse is reported at the field and line it is written
// on: a webhook secret that is not "whsec_" and base64, a header value
// with a control character, a reserved header, a method that is not a
// token, a NUL in an argument. Run.Executor builds the executor. So a file
// that Parse accepts never fails when a replica builds its executors.
//
// # Warnings
//
// Warnings lists what the file allows but weakens: TLS to Redis with
// insecure_skip_verify, and a PostgreSQL URL to another host whose
// sslmode does not verify the server (none, disable, allow, prefer or
// require). `onetick validate` prints them, `onetick run` logs them.
//
// # Using the result
//
// OneTickJobs, LeaseConfig and JobMetrics give the onetick.Job,
// onetick.LeaseConfig and onetick.JobMetrics values for onetick.Config;
// RedisClient, BackendOptions and PostgresOptions map a backend section to
// the go-redis client and the store's options (RedisOptions gives the
// standalone client's options: RedisURL plus TLSConfig). This package
// never chooses or opens a store: the program does that in one place,
// internal/stores, which calls these mappings. Relative TLS
// file names are resolved against the configuration file's directory.
package config
