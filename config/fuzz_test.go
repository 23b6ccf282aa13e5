package config

import (
	"encoding/json"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(fullExample))
	f.Add([]byte(""))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: '@every 1m'\n    payload: {n: ${N}, s: \"${S:-x}\", l: $${L}}\n"))
	f.Add([]byte("jobs:\n  - &b\n    name: a\n    schedule: '0 2 * * *'\n    timezone: Europe/Berlin\n  - <<: *b\n    name: b\n    prefer: duplicate\n"))
	f.Add([]byte("backend:\n  redis:\n    url: rediss://u:p@h:6380/1\n    tls:\n      ca_file: ca.pem\n"))
	f.Add([]byte("lease: {ttl: 1s, renew: 300ms, safety_margin: 100ms}\nhttp: {listen: 'off'}\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: 'H H(2-5) * * *'\n  - name: b\n    schedule: '0 18 L-2 * 5#3,5L'\n  - schedule: 'H * * * *'\n"))
	f.Add([]byte("jobs:\n  - {name: a, schedule: '@daily'}\n  - {name: b, schedule: '@daily'}\nmetrics: {per_job: listed, jobs: [a, ${J}]}\n"))
	for _, c := range errCases {
		f.Add([]byte(c.yaml))
	}
	env := envMap(map[string]string{"N": "5", "S": "", "URL": "redis://h:6379/0", "PW": "pw", "J": "b"})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parse("fuzz.yaml", data, env)
		if err != nil {
			if file != nil {
				t.Fatal("a File with an error")
			}
			es, ok := err.(Errors)
			if !ok || len(es) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			for _, e := range es {
				if e == nil || e.Msg == "" || e.File != "fuzz.yaml" {
					t.Fatalf("bad problem %#v", e)
				}
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty message")
			}
			return
		}
		if file == nil {
			t.Fatal("nil File without an error")
		}
		jobs, err := file.OneTickJobs()
		if err != nil {
			t.Fatalf("accepted file fails OneTickJobs: %v", err)
		}
		cfg := onetick.Config{Backend: memory.New(memory.Options{}), Jobs: jobs, Lease: file.LeaseConfig(), JobMetrics: file.JobMetrics()}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted file fails onetick's checks: %v", err)
		}
		for _, j := range file.Jobs {
			if !json.Valid([]byte(j.Payload)) || j.Stream == "" || j.Timezone == "" || j.MaxCatchup <= 0 {
				t.Fatalf("job without defaults: %+v", j)
			}
		}
		if msg := checkListen(file.HTTP.Listen); msg != "" {
			t.Fatalf("accepted listen %q: %s", file.HTTP.Listen, msg)
		}
		if r := file.Backend.Redis; r != nil {
			// Not RedisOptions: it would read the TLS files the input names.
			if _, err := goredis.ParseURL(file.RedisURL()); err != nil {
				t.Fatalf("accepted URL fails go-redis: %v", err)
			}
			if r.Password != "" && strings.Contains(file.MaskedRedisURL(), r.Password) {
				t.Fatalf("masked URL shows the password")
			}
		}
	})
}
