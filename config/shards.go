package config

import (
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick"
)

// DefaultShards is the number of shards without a shards key: one, which
// is today's single leader (docs/shards.md).
const DefaultShards = 1

// shards reads the top-level shards: the number of shards the fleet's
// jobs are spread over (issue 23, docs/shards.md). It is a top-level
// setting, not a store's, because every replica and every store must
// agree on it: it is part of the stored layout, like the key prefix.
//
// `onetick run` gives File.Shards to the engine (onetick.Config.Shards),
// which runs a leader per shard; deadlines are refused with more than one
// shard (shardedDeadlines). The file store has one replica by construction, so it refuses more than one shard:
// here when the file names backend.file, in FileStoreShards when it is
// the default (no store named, and none given on the command line).
func (p *parser) shards(e, backend entry) {
	p.f.Shards = DefaultShards
	if !e.ok() || isNull(e.val) {
		return
	}
	v, ok := p.integer(e, "shards", 1, onetick.MaxShards)
	if !ok {
		return
	}
	p.f.Shards = int(v)
	if v > 1 {
		if line := fileStoreLine(backend); line > 0 {
			p.errorf(e.line, "shards", "%s", fileStoreShards(int(v), "backend.file at line "+strconv.Itoa(line)+" is the file store"))
		}
	}
}

// fileStoreShards is the message refusing n shards on the file store.
func fileStoreShards(n int, where string) string {
	return strconv.Itoa(n) + " shards need a shared store (backend.redis, backend.postgres or backend.memory): " +
		where + ", which runs one replica and takes shards: 1 only"
}

// fileStoreLine returns the line of backend.file when the backend section
// names it (not null), else 0.
func fileStoreLine(backend entry) int {
	m := deref(backend.val)
	if m == nil || m.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := deref(m.Content[i]); k != nil && k.Value == "file" && !isNull(m.Content[i+1]) {
			return k.Line
		}
	}
	return 0
}

// FileStoreShards refuses more than one shard on the file store when no
// store is named in the file: whether it is the file store is known only
// after the command line's overrides (--redis, ONETICK_REDIS_URL,
// --memory), so the caller that chose it calls this. A file that names
// backend.file is refused by Parse already. The error names the file and
// the line of shards.
func (f *File) FileStoreShards() error {
	if f.Shards <= 1 {
		return nil
	}
	return Errors{{File: f.Path, Line: f.line("shards", 0), Field: "shards",
		Msg: fileStoreShards(f.Shards, "no shared store is given (backend, --redis, ONETICK_REDIS_URL), so it is the file store")}}
}

// ShardsLine is the line of the shards key (0 when the file has none).
func (f *File) ShardsLine() int { return f.line("shards", 0) }
