// Package executor runs the work of a tick outside Go: a command (Command)
// or a signed HTTP call (HTTP), behind one small interface,
//
//	type Executor interface { Execute(ctx context.Context, r Run) error }
//
// so the worker that consumes ticks needs to know nothing about either. A
// Run carries the tick: job, slot, tick id ("job:unixmillis"), the fencing
// epoch of the leader that enqueued it, the 1-based attempt and the JSON
// payload.
//
// # Outcomes
//
// The error an executor returns tells the worker what to do next:
//
//	nil                                   success
//	errors.Is(err, ErrPermanent)          do not retry: dead-letter now (the dead
//	                                      letter keeps the tick for replay once the
//	                                      cause is fixed)
//	err has RetryAfter() time.Duration    failed; wait at least that long before the
//	                                      next attempt (see RetryAfter)
//	errors.Is(err, ctx.Err())             the caller's context ended the attempt
//	any other error                       an ordinary failed attempt, retried up to
//	                                      the job's maximum attempts
//
// Errors say what happened in terms an operator can act on (the exit code
// and the last lines of standard error; the HTTP status and the start of
// the response body) and never contain a secret: not the command's
// arguments or environment, not the URL's password or query values, not the
// configured headers, not the signing secrets or signatures.
//
// # Results
//
// Beside its error, an attempt reports what it produced to Run.Report,
// once, before Execute returns; the worker puts it on the run ledger's
// outcome event (worker.Report, docs/ledger.md):
//
//	Command   the exit code when the command exited on its own (none when a
//	          signal killed it or onetick stopped it), and the last
//	          onetick.MaxEventOutput bytes of its output: the lines of standard
//	          output and standard error in the order onetick read them (two
//	          pipes, so lines written to both streams at nearly the same time
//	          may swap)
//	HTTP      the response's status and the last onetick.MaxEventOutput bytes
//	          of its body, of at most MaxBodyRead bytes read within the
//	          attempt's Timeout (a longer or stalled body is cut, and the output
//	          ends with a line saying so); nothing when no response came
//
// Both keep only a bounded tail in memory (twice MaxEventOutput), however
// much a command prints.
//
// # Command
//
// A Command runs Argv directly (no shell unless Argv names one) with:
//
//	ONETICK_JOB       job name
//	ONETICK_SLOT      slot, RFC 3339 in UTC with milliseconds (2024-05-01T06:00:00.000Z)
//	ONETICK_SLOT_MS   slot, Unix milliseconds
//	ONETICK_TICK      tick id, "job:unixmillis": use it as your idempotency key
//	ONETICK_EPOCH     fencing epoch of the leader that enqueued the tick
//	ONETICK_ATTEMPT   attempt number, from 1
//	TRACEPARENT       the attempt's W3C trace context, when ctx carries an
//	                  OpenTelemetry span (tracing configured); TRACESTATE too
//	                  when it has one. An HTTP call carries the same in its
//	                  traceparent and tracestate headers.
//
// plus Env, plus a few variables inherited from onetick: PATH (a standard
// one if onetick has none), HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE,
// LC_*, TZ and TMPDIR. Nothing else of onetick's environment is passed on,
// because that is where the Redis password and the webhook secrets live;
// give a command what it needs in Env. The payload arrives on standard
// input (empty when the tick has none). Every line of standard output and
// standard error is logged at Info with the keys job, tick, stream
// (stdout or stderr) and line; lines longer than MaxLineBytes are cut and
// marked truncated=true.
//
//	exit 0                                      success
//	exit non-zero, or killed by a signal        *ExitError (code or signal, last stderr
//	  that onetick did not send                   lines): an ordinary failure
//	program not found or not executable,        ErrPermanent
//	  working directory missing
//	Timeout passed                              an ordinary failure, "timed out"
//	ctx done (shutdown past its bound,          an error wrapping the context's cause
//	  ownership of the tick lost)
//
// A command that exits on its own keeps its result even if a deadline
// passed in the same instant. A run ends when its command exits: processes
// it left running in its process group are terminated like on a timeout
// (a warning is logged), so "the run is over" means nothing of it is left
// running, which is what the worker's overlap control relies on.
//
// # Supervision
//
// Every run has a supervisor process between onetick and the command:
//
//	onetick ──lifeline pipe, status pipe──▶ supervisor ──▶ command ──▶ grandchildren
//	(its own process group)                 (own group,    (process group G, which
//	                                         subreaper)      descendants inherit)
//
// The supervisor is the onetick binary itself: Execute re-executes
// /proc/self/exe (the running image, even if a deploy replaced the file)
// with ONETICK_SUPERVISE in its environment, and MaybeSupervise, the first
// call in main, turns that process into the supervisor. It starts the
// command in a new process group G, reports its pid and its exit status to
// onetick over the status pipe, and stops the run by sending SIGTERM to the
// whole group G and, after KillGrace, SIGKILL. It stops the run when:
//
//   - the command exits (whatever it left running in G goes with it);
//   - the lifeline pipe reaches EOF: the executor closed its end (timeout,
//     or the caller's context ended), or onetick died and the kernel
//     closed it, whatever killed onetick, SIGKILL included;
//   - the supervisor itself gets SIGTERM, SIGINT or SIGHUP.
//
// As a child subreaper (PR_SET_CHILD_SUBREAPER) it inherits the
// descendants whose parent exits, such as the backgrounded half of
// `sh -c 'sleep 300 & sleep 300'`, so it can reap every one of them. It
// exits only when group G is empty, and Execute returns only after the
// supervisor has exited: when Execute returns, nothing of the run is left.
// Execute does not trust the supervisor blindly: if it has not exited
// KillGrace plus ten seconds after being asked to stop, Execute kills
// group G and the supervisor itself with SIGKILL.
//
// Why this design. The requirement is that a replica that dies, however it
// dies, leaves no command running unsupervised, or the fleet-wide overlap
// control means nothing. The alternatives fall short:
//
//   - PR_SET_PDEATHSIG on the command fires when the thread that forked it
//     exits, not the process (golang/go#27505: Go may retire that thread
//     while onetick lives), and it reaches only the direct child, never the
//     grandchildren a shell script starts.
//   - A subreaper or group kill inside onetick dies with onetick.
//   - A cgroup per run would contain everything, but needs privileges or a
//     delegated cgroup tree that a plain deployment does not have.
//
// A pipe's write end is closed by the kernel when its owner dies, on any
// path, at once: no thread affinity, no polling, and no race at start (if
// onetick is already gone, the first read returns EOF). The cost is one
// small extra process per running command.
//
// What is not covered: a process that leaves group G on purpose (setsid,
// a daemonizing tool) is outside the group signals; the supervisor reports
// it (a warning is logged) and stops waiting for it, and Execute stops
// reading output it still holds after a short delay. A supervisor killed
// by SIGKILL on its own is noticed by Execute, which then kills group G.
// A replica that is frozen (SIGSTOP, a stalled VM) keeps its commands
// running, because it is alive: fencing by epoch, not liveness, is the
// answer there. Under systemd, prefer KillMode=mixed: with the default
// (control-group) every command receives SIGTERM at the same moment as
// onetick, instead of being allowed to finish within the worker's
// shutdown bound.
//
// # HTTP
//
// An HTTP executor sends one request per attempt (POST unless Method says
// otherwise) with the configured headers and a JSON body:
//
//	{"job":"report","slot":"2024-05-01T06:00:00.000Z","slot_ms":1714543200000,
//	 "tick":"report:1714543200000","epoch":7,"attempt":1,"payload":{...}}
//
// signed per the Standard Webhooks specification (see package webhook):
//
//	webhook-id         the tick id, with bytes other than letters, digits,
//	                   '-', '_' and ':' percent-encoded (webhook.MessageID); the
//	                   same on every attempt, so a receiver deduplicates on it
//	webhook-timestamp  the send time of this attempt, Unix seconds
//	webhook-signature  "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>", one per
//	                   configured secret, space-separated (rotation)
//
// Secrets are "whsec_" + base64 of 24 to 64 random bytes; raw strings are
// refused (see package webhook for why). Receivers verify with
// webhook.Verify on the raw body.
//
//	2xx                                  success
//	3xx                                  ErrPermanent: redirects are not followed
//	410 Gone                             ErrPermanent ("gone"): the receiver asked
//	                                     for no more calls
//	408, 429, 5xx                        an ordinary failure; on 429 and 503 a
//	                                     Retry-After (seconds or HTTP-date, capped at
//	                                     MaxRetryAfter) becomes the RetryAfter delay
//	other 4xx                            ErrPermanent: a client error that retrying
//	                                     cannot fix; replay the dead letter after
//	                                     fixing the receiver or the configuration
//	no response (refused, reset,         an ordinary failure
//	  Timeout passed)
//	ctx done                             an error wrapping the context's cause
//
// Redirects are not followed: the specification counts a 3xx as a failure,
// and following it would send the signed body and the configured headers,
// credentials included, wherever the receiver points. Logs carry the
// method, the URL with its password and query values masked, the status
// and the tick, never a header value, a secret or a signature.
package executor
