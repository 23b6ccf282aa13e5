package config

// Backend selects the store. With Redis nil the embedded in-process backend
// is used.
type Backend struct {
	Redis *Redis `yaml:"redis"`
	// File is the durable embedded store (the default when no backend is
	// configured): one SQLite file on this host.
	File *FileStore `yaml:"file"`
	// Memory selects the in-process store: state lost on exit (tests,
	// demos).
	Memory bool `yaml:"memory"`
	// Postgres is a PostgreSQL database.
	Postgres *Postgres `yaml:"postgres"`
	// Etcd is an etcd cluster.
	Etcd *Etcd `yaml:"etcd"`
}

// FileStore configures the durable embedded store.
type FileStore struct {
	// Path of the file; default $STATE_DIRECTORY/onetick.db, else
	// $XDG_STATE_HOME/onetick/onetick.db, else
	// ~/.local/state/onetick/onetick.db.
	Path string `yaml:"path"`
}

// backendKeys are the keys of the backend section: the stores, of which
// at most one may be given.
var backendKeys = []string{"redis", "file", "memory", "postgres", "etcd"}

// fileStoreKeys are the keys of backend.file.
var fileStoreKeys = []string{"path"}

// backend walks the backend section and returns the key prefix in effect.
func (p *parser) backend(e entry) string {
	if !e.ok() {
		return DefaultPrefix
	}
	m, ok := p.mapping(e.val, e.line, "backend")
	if m == nil || !ok {
		return DefaultPrefix
	}
	sec := p.fields(p.entries(m, "backend"), "backend", "backend", backendKeys...)
	if x, ok := sec["postgres"]; ok && !isNull(x.val) {
		p.postgres(x)
	}
	if x, ok := sec["etcd"]; ok && !isNull(x.val) {
		p.etcd(x)
	}
	if x, ok := sec["file"]; ok && !isNull(x.val) {
		fm, ok := p.mapping(x.val, x.line, "backend.file")
		if ok {
			p.f.Backend.File = &FileStore{}
			if fm != nil {
				f := p.fields(p.entries(fm, "backend.file"), "backend.file", "backend.file", fileStoreKeys...)
				if pe, ok := f["path"]; ok {
					p.f.Backend.File.Path, _ = p.str(pe, "backend.file.path")
				}
			}
		}
	}
	if x, ok := sec["memory"]; ok && !isNull(x.val) {
		if fm, ok := p.mapping(x.val, x.line, "backend.memory"); ok {
			if fm != nil {
				p.fields(p.entries(fm, "backend.memory"), "backend.memory", "backend.memory")
			}
			p.f.Backend.Memory = true
		}
	}
	n := 0
	for _, k := range backendKeys {
		if _, ok := sec[k]; ok {
			n++
		}
	}
	if n > 1 {
		p.errorf(e.line, "backend", "give one of redis, postgres, etcd, file and memory")
	}
	if r, ok := sec["redis"]; ok {
		return p.redis(r)
	}
	return DefaultPrefix
}
