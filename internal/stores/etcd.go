package stores

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/onetick/onetick/config"
	otetcd "github.com/onetick/onetick/etcd"
)

// openEtcd connects to the configured etcd cluster and checks that it
// answers.
func openEtcd(ctx context.Context, f *config.File, o Options) (*Handle, error) {
	cfg, opts, _, err := f.EtcdConfig()
	if err != nil {
		return nil, invalid(err)
	}
	opts.Ledger = o.ledger
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg.DialTimeout = 5 * time.Second
	b, err := otetcd.Open(pctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach etcd at %s: %v", f.MaskedEtcd(), err)
	}
	h := &Handle{backend: b, close: b.Close,
		desc:     Description{Kind: Etcd, Address: f.MaskedEtcd(), Prefix: opts.Prefix},
		work:     func(group string) WorkStore { return b.WorkerStore(group) },
		viewWork: viewWorkStore[*otetcd.Backend, *otetcd.WorkerStore](Etcd),
	}
	h.describe = func(context.Context) string { return "etcd " + f.MaskedEtcd() }
	h.announce = func(ctx context.Context, log *slog.Logger) {
		log.Info("using etcd", "store", h.describe(ctx),
			"clock", "the replica's own: etcd offers no time to clients (docs/etcd.md)")
	}
	return h, nil
}
