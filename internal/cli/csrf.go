package cli

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/onetick/onetick"
)

// Cross-site request forgery. The API listens on loopback, where any web
// site the operator visits can make the operator's browser send requests
// to it. Every change needs the bearer token, which such a page does not
// have and a browser never adds by itself; these checks refuse what a
// browser marks as coming from another site anyway, before the token is
// looked at:
//   - Sec-Fetch-Site (sent by every current browser) cross-site or
//     same-site: 403. same-origin (the job page's own fetch()) and none
//     (typed by the user) pass, as does a request without it (curl, the
//     CLI's scripts).
//   - Origin present and not this request's Host (an older browser's
//     cross-origin request, or "null" from a sandboxed frame or a file):
//     403.
//   - A POST whose Content-Type is not application/json: 415. A form on
//     another site can post text/plain (a body that parses as JSON)
//     without the browser asking first; application/json from another
//     origin makes the browser ask (a CORS preflight), which this API never
//     grants.

// crossSite says why r is refused as a request from another site, or "".
func crossSite(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Sprintf("refused: the browser marks this request as %s (Sec-Fetch-Site): changes are taken from this replica's own pages "+
			"and from clients that are not browsers only; nothing was changed", onetick.Excerpt(site))
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("refused: the request comes from origin %s, not from this replica (Host %s): "+
				"changes are taken from this replica's own pages and from clients that are not browsers only; nothing was changed",
				onetick.Excerpt(o), onetick.Excerpt(r.Host))
		}
	}
	return ""
}

// jsonContent reports whether r's body is declared application/json
// (any parameters, such as charset, allowed).
func jsonContent(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// guardChange applies the checks above; false when it answered.
func guardChange(w http.ResponseWriter, r *http.Request) bool {
	if why := crossSite(r); why != "" {
		writeJSON(w, http.StatusForbidden, apiError{why})
		return false
	}
	return true
}

// guardJSON refuses a POST that does not declare a JSON body; false when
// it answered.
func guardJSON(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || jsonContent(r) {
		return true
	}
	got := "none"
	if ct := r.Header.Get("Content-Type"); ct != "" {
		got = onetick.Excerpt(ct)
	}
	writeJSON(w, http.StatusUnsupportedMediaType, apiError{"request body: Content-Type must be application/json, got " + got + "; nothing was changed"})
	return false
}
