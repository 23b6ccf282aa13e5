package sqlite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// The errors that Open returns for a file it will not use, wrapped in a
// *FileError that names the file. onetick never starts fresh over an
// existing file: the operator decides (restore a backup, move the file
// aside).
var (
	// ErrNotStore: the file exists but is not a onetick store: empty, not
	// a SQLite database, or another application's database.
	ErrNotStore = errors.New("not a onetick store")
	// ErrCorrupt: the file is a onetick store that SQLite cannot read
	// whole: truncated, or pages that fail its integrity check.
	ErrCorrupt = errors.New("corrupted onetick store")
	// ErrNewerSchema: the file was written by a newer onetick, whose
	// schema this build does not know.
	ErrNewerSchema = errors.New("onetick store of a newer schema version")
	// ErrUnreadable: the file cannot be opened or read at all
	// (permissions, a directory, an I/O error).
	ErrUnreadable = errors.New("unreadable onetick store")
)

// FileError says why a file cannot be used as the store. errors.Is
// matches its Kind (ErrNotStore, ErrCorrupt, ErrNewerSchema,
// ErrUnreadable) and the underlying error.
type FileError struct {
	Path   string
	Kind   error
	Detail string
	Err    error
}

func (e *FileError) Error() string {
	s := "sqlite: " + e.Path + ": " + e.Kind.Error() + ": " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the underlying error.
func (e *FileError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func fileErr(path string, kind error, err error, format string, args ...any) *FileError {
	return &FileError{Path: path, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
}

// applicationID marks a SQLite file as onetick's ("OTK1" in the header at
// offset 68), so that a database of another application is refused
// rather than written into.
const applicationID = 0x4f544b31

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

const headerSize = 100

// checkHeader reads the header of an existing file without SQLite, so that
// a file onetick must not use is refused before SQLite opens (and might
// write beside) it. It returns the file's schema version.
func checkHeader(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fileErr(path, ErrUnreadable, err, "cannot open")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fileErr(path, ErrUnreadable, err, "cannot stat")
	}
	if st.IsDir() {
		return 0, fileErr(path, ErrUnreadable, nil, "is a directory, not a file")
	}
	size := st.Size()
	if size == 0 {
		return 0, fileErr(path, ErrNotStore, nil,
			"the file is empty (0 bytes), perhaps truncated; onetick does not start fresh over an existing file: restore it from a backup or move it aside")
	}
	h := make([]byte, headerSize)
	n, err := io.ReadFull(f, h)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, fileErr(path, ErrUnreadable, err, "cannot read the header")
	}
	h = h[:n]
	if !bytes.HasPrefix(h, sqliteMagic) {
		if n < len(sqliteMagic) && bytes.HasPrefix(sqliteMagic, h) {
			return 0, fileErr(path, ErrCorrupt, nil, "truncated to %d bytes, shorter than a SQLite header", size)
		}
		return 0, fileErr(path, ErrNotStore, nil, "not a SQLite database (it begins with %s)", preview(h))
	}
	if n < headerSize {
		return 0, fileErr(path, ErrCorrupt, nil, "truncated to %d bytes, shorter than a SQLite header", size)
	}
	app := binary.BigEndian.Uint32(h[68:72])
	version := int(int32(binary.BigEndian.Uint32(h[60:64])))
	if app != applicationID {
		return 0, fileErr(path, ErrNotStore, nil,
			"a SQLite database of another application (application_id %#x, onetick's is %#x); onetick does not write into it", app, applicationID)
	}
	if version > schemaVersion {
		return 0, fileErr(path, ErrNewerSchema, nil,
			"written by a newer onetick (schema version %d; this build knows versions up to %d): upgrade onetick, or restore a file of this version", version, schemaVersion)
	}
	return version, nil
}

// preview shows the first bytes of a file in an error message.
func preview(b []byte) string {
	if len(b) > 16 {
		b = b[:16]
	}
	return strconv.Quote(string(b))
}

// exists reports whether path names something (a file, a directory).
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fileErr(path, ErrUnreadable, err, "cannot stat")
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// DefaultPath is where the store lives when no path is configured:
// $STATE_DIRECTORY/onetick.db under systemd (StateDirectory=), else
// $XDG_STATE_HOME/onetick/onetick.db, else
// $HOME/.local/state/onetick/onetick.db. getenv is os.Getenv in
// production.
func DefaultPath(getenv func(string) string) (string, error) {
	if d := getenv("STATE_DIRECTORY"); d != "" {
		// systemd may list several directories, separated by colons.
		if i := bytes.IndexByte([]byte(d), ':'); i >= 0 {
			d = d[:i]
		}
		return filepath.Join(d, "onetick.db"), nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "onetick", "onetick.db"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("sqlite: no default path: neither STATE_DIRECTORY, XDG_STATE_HOME nor HOME is set; give the file's path")
	}
	return filepath.Join(home, ".local", "state", "onetick", "onetick.db"), nil
}

// Exposure is a store file, or its directory, that others than its owner
// can reach: the file holds payloads, pauses with who made them and why,
// and the workers' errors.
type Exposure struct {
	Path string
	Mode fs.FileMode
	Dir  bool
}

// ModeString is the mode in octal, as chmod takes it.
func (x Exposure) ModeString() string { return fmt.Sprintf("%04o", x.Mode.Perm()) }

func (x Exposure) String() string {
	if x.Dir {
		return fmt.Sprintf("the store's directory %s is mode %s: others can list and reach it; chmod o-rwx %s (onetick makes it 0700)",
			x.Path, x.ModeString(), x.Path)
	}
	return fmt.Sprintf("the store %s is mode %s: others than its owner can read or write it; chmod 600 %s (onetick makes it 0600)",
		x.Path, x.ModeString(), x.Path)
}

// Exposed lists what of the store at path others can reach: the file when
// its group or others have any permission on it, its directory when
// others have any. Nothing is listed for what does not exist (yet).
func Exposed(path string) []Exposure {
	var out []Exposure
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o077 != 0 {
		out = append(out, Exposure{Path: path, Mode: fi.Mode()})
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm()&0o007 != 0 {
		out = append(out, Exposure{Path: dir, Mode: fi.Mode(), Dir: true})
	}
	return out
}
