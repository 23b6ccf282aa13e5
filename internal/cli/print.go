package cli

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable is how the CLI prints text that came from the store (a
// pause's who and reason, a job's name, a control-log entry, a dead
// letter's error) or from anyone else: every rune a terminal would act on
// instead of showing (escape sequences, carriage returns, NUL, tabs that
// shift columns, bidirectional overrides) and every byte that is not
// UTF-8 is written as a Go escape (\x1b, \r, \u202e, \xff), so what is
// printed cannot clear the screen, forge a line or hide a character.
// Printable text, spaces included, is left as it is.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !(r == ' ' || unicode.IsPrint(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// fprintf is fmt.Fprintf for the CLI's printers: every argument that is a
// string (of any string type) or an error goes through printable first;
// the format's own tabs and newlines are kept.
func fprintf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = printable(v)
		case error:
			args[i] = printable(v.Error())
		default:
			if rv := reflect.ValueOf(a); rv.IsValid() && rv.Kind() == reflect.String {
				args[i] = printable(rv.String())
			}
		}
	}
	fmt.Fprintf(w, format, args...)
}
