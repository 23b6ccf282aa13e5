package redact_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/onetick/onetick/internal/redact"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		// Redis.
		"redis://127.0.0.1:6379/0":                    "redis://127.0.0.1:6379/0",
		"redis://:s3cret@host:6379/0":                 "redis://:xxxxx@host:6379/0",
		"rediss://user:s3cret@host:6380":              "rediss://user:xxxxx@host:6380",
		"redis://s3cret@host":                         "redis://xxxxx@host",
		"redis://user:p@ss@word@host:1/2":             "redis://user:xxxxx@host:1/2",
		"redis://:pa?ss@host:6379/0":                  "redis://xxxxx",
		"redis://:pa#ss@host:6379/0":                  "redis://:xxxxx@host:6379/0",
		"redis://:12/x@host":                          "redis://:xxxxx@host",
		"redis://h:6379/0?password=s3cret":            "redis://h:6379/0?password=xxxxx",
		"redis://h:6379/0?db=2&dial_timeout=3s":       "redis://h:6379/0?db=2&dial_timeout=3s",
		"unix:///run/redis.sock?db=1&password=s3cret": "unix:///run/redis.sock?db=1&password=xxxxx",
		"unix://user:s3cret@/run/redis.sock?db=1":     "unix://user:xxxxx@/run/redis.sock?db=1",
		// Sentinel and Cluster addresses.
		"10.0.0.1:26379":             "10.0.0.1:26379",
		"user:s3cret@10.0.0.1:26379": "xxxxx@10.0.0.1:26379",
		"s3cret@10.0.0.1:26379":      "xxxxx@10.0.0.1:26379",
		// PostgreSQL URLs.
		"postgres://onetick:s3cret@db:5432/app?sslmode=verify-full": "postgres://onetick:xxxxx@db:5432/app?sslmode=verify-full",
		"postgres://onetick@db:5432/app":                            "postgres://onetick@db:5432/app",
		"postgresql://u@db/app?password=s3cret&sslmode=require":     "postgresql://u@db/app?password=xxxxx&sslmode=require",
		"postgres://u@db/app?sslpassword=s3cret":                    "postgres://u@db/app?sslpassword=xxxxx",
		"postgres://u@db/app?PASSWORD=s3cret":                       "postgres://u@db/app?PASSWORD=xxxxx",
		"postgres://u@db/app?options=-c%20x%3Ds3cret":               "postgres://u@db/app?options=xxxxx",
		"postgres:///app?host=/run/postgresql&password=s3cret":      "postgres:///app?host=/run/postgresql&password=xxxxx",
		"postgres://db/app?password=p@ss":                           "postgres://xxxxx",
		"postgres://u:s3cret@db/app#frag":                           "postgres://u:xxxxx@db/app",
		"postgresql://u:p@ss@word@host/db?x=1":                      "postgresql://u:xxxxx@host/db?x=xxxxx",
		"postgres://127.0.0.1:5432/db":                              "postgres://127.0.0.1:5432/db",
		// Keyword/value connection strings.
		"host=127.0.0.1 user=postgres dbname=test":                     "host=127.0.0.1 user=postgres dbname=test",
		"host=db user=u password=s3cret dbname=app":                    "host=db user=u password=xxxxx dbname=app",
		"host=db password = 'it''s s3cret' sslmode=require":            "host=db password=xxxxx xxxxx",
		`host=db password='s3 \'cret' sslpassword=k3y sslmode=require`: "host=db password=xxxxx sslpassword=xxxxx sslmode=require",
		"host=db password='unterminated s3cret":                        "host=db password=xxxxx",
		// Webhook URLs.
		"https://hooks.example/x?token=s3cret": "https://hooks.example/x?token=xxxxx",
		"https://user:s3cret@hooks.example/x":  "https://user:xxxxx@hooks.example/x",
		"not a url":                            "not a url",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzURL writes a password into each form an address can carry one in,
// as an operator might (in the user information escaped or not), and
// checks that the password never survives.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"s3cret", "p@ss@word", "a:b/c?d#e", "x y'z\\", "%zz%41", "://@", "sslmode=require&"} {
		for form := range uint8(forms) {
			f.Add(s, form, false)
			f.Add(s, form, true)
		}
	}
	f.Fuzz(func(t *testing.T, pw string, form uint8, escape bool) {
		in, written, ok := place(pw, form%forms, escape)
		if !ok || len(pw) < 4 || strings.Contains(pw, redact.Mask) {
			return
		}
		// A password that the text around it, or the mask with its
		// delimiters, already holds says nothing.
		around := strings.Replace(in, written, " ", 1) + " ://" + redact.Mask + "@ :" + redact.Mask + "@ =" + redact.Mask + "&"
		if strings.Contains(around, pw) {
			return
		}
		got := redact.URL(in)
		if strings.Contains(got, pw) {
			t.Fatalf("URL(%q) = %q: the password %q survives", in, got, pw)
		}
		if e := url.QueryEscape(pw); e != pw && strings.Contains(got, e) {
			t.Fatalf("URL(%q) = %q: the password %q survives escaped", in, got, pw)
		}
	})
}

const forms = 11

// place writes pw into an address of the given form and returns the
// address and pw as written in it; ok is false when the form cannot hold
// pw (an unquoted keyword value with a space).
func place(pw string, form uint8, escape bool) (addr, written string, ok bool) {
	// A query value is always escaped: unescaped, an & or = in it ends
	// the value for every driver, and what follows is not the password.
	q := url.QueryEscape(pw)
	ui := pw
	if escape {
		ui = url.PathEscape(pw)
	}
	switch form {
	case 0:
		return "redis://user:" + ui + "@127.0.0.1:6379/0", ui, true
	case 1:
		// A lone user information as the password: with a colon it is
		// user:password to every driver, and the user name is shown.
		if strings.Contains(ui, ":") {
			return "", "", false
		}
		return "rediss://" + ui + "@db.internal:6380", ui, true
	case 2:
		return "unix:///run/redis.sock?db=1&password=" + q, q, true
	case 3:
		return "unix://:" + ui + "@/run/redis.sock", ui, true
	case 4:
		return "user:" + pw + "@10.0.0.1:26379", pw, true
	case 5:
		return "postgres://onetick:" + ui + "@db:5432/app?sslmode=verify-full", ui, true
	case 6:
		return "postgresql://onetick@db/app?sslmode=require&password=" + q, q, true
	case 7:
		return "postgres://onetick@db/app?sslpassword=" + q + "&application_name=x", q, true
	case 8:
		v := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw)
		return "host=db user=onetick password='" + v + "' dbname=app", v, true
	case 9:
		if strings.ContainsAny(pw, " \t\n\r\f\v'\\") {
			return "", "", false
		}
		return "host=db password=" + pw + " sslmode=require", pw, true
	default:
		return "https://hooks.example/x?sig=" + q, q, true
	}
}

func TestError(t *testing.T) {
	for _, raw := range []string{"redis://u:p#ss@host:6379", "redis://:s3%zzcret@h", "postgres://u:s3cret@h:port/db"} {
		_, err := url.Parse(raw)
		if err == nil {
			t.Fatalf("%q parsed", raw)
		}
		got := redact.Error(err)
		for _, piece := range []string{"s3", "p#ss", "#ss", "cret"} {
			if strings.Contains(got, piece) {
				t.Errorf("Error(%q) = %q: %q survives", raw, got, piece)
			}
		}
		if !strings.HasPrefix(got, "parse URL: ") {
			t.Errorf("Error(%q) = %q", raw, got)
		}
	}
	if got := redact.Error(errors.New("plain")); got != "plain" {
		t.Errorf("Error(plain) = %q", got)
	}
}
