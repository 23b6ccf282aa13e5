package redistest

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// AdminUser is the user the harness itself logs in as when the default
// user is disabled; its password is random and known only to Options.
const AdminUser = "redistest-admin"

type aclConfig struct {
	users       []aclUser
	defaultPass string
	defaultOff  bool
}

type aclUser struct {
	name, pass string
	rules      []string
}

// User creates an ACL user at start, enabled, with the password (none
// when empty: nopass) and the ACL rules as ACL SETUSER takes them, for
// example User("app", "s3cret", "~app:*", "&app:*", "+@read", "+set").
// Without rules the user may run no command. Users live in an ACL file
// in the server's directory, so they survive a Restart.
func User(name, password string, rules ...string) Option {
	return func(c *config) {
		c.acl.users = append(c.acl.users, aclUser{name: name, pass: password, rules: rules})
	}
}

// RequirePass gives the default user a password (it keeps all rights).
func RequirePass(password string) Option {
	return func(c *config) { c.acl.defaultPass = password }
}

// DisableDefaultUser turns the default user off, so a client that does
// not log in as one of the User users can do nothing. The harness then
// logs in as AdminUser.
func DisableDefaultUser() Option {
	return func(c *config) { c.acl.defaultOff = true }
}

// setupACL writes the ACL file and chooses the harness's credentials.
func (s *Server) setupACL(a *aclConfig) {
	s.tb.Helper()
	if len(a.users) == 0 && a.defaultPass == "" && !a.defaultOff {
		return
	}
	// An ACL file line is split on spaces, and one that fails to parse
	// keeps the server from starting with a message that does not name the
	// option; say here which value is wrong.
	word := func(what, v string) {
		if strings.ContainsAny(v, " \t\r\n") {
			s.tb.Fatalf("redistest: ACL %s %q contains white space", what, v)
		}
	}
	var lines []string
	switch {
	case a.defaultOff:
		lines = append(lines, "user default reset")
		s.adminUser, s.adminPass = AdminUser, randomToken(s.tb)
		lines = append(lines, "user "+AdminUser+" on >"+s.adminPass+" ~* &* +@all")
	case a.defaultPass != "":
		word("password of the default user", a.defaultPass)
		lines = append(lines, "user default on >"+a.defaultPass+" ~* &* +@all")
		s.adminPass = a.defaultPass
	default:
		lines = append(lines, "user default on nopass ~* &* +@all")
	}
	s.users = map[string]string{}
	for _, u := range a.users {
		word("user name", u.name)
		if u.name == "default" || u.name == AdminUser {
			s.tb.Fatalf("redistest: User(%q): use RequirePass or DisableDefaultUser for the default user", u.name)
		}
		line := "user " + u.name + " on "
		if u.pass == "" {
			line += "nopass"
		} else {
			word("password of "+u.name, u.pass)
			line += ">" + u.pass
		}
		for _, r := range u.rules {
			word("rule of "+u.name, r)
			line += " " + r
		}
		lines = append(lines, line)
		s.users[u.name] = u.pass
	}
	s.aclFile = writeFile(s.tb, s.dir, "users.acl", lines)
}

func (s *Server) userPassword(name string) string {
	s.tb.Helper()
	p, ok := s.users[name]
	if !ok {
		s.tb.Fatalf("redistest: no user %q on %s (create it with the User option)", name, s.Addr())
	}
	if p == "" {
		// go-redis sends AUTH only with a password, and a nopass user
		// takes any password.
		return "nopass"
	}
	return p
}

func randomToken(tb interface{ Fatalf(string, ...any) }) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return hex.EncodeToString(b)
}
