//go:build verify

package verify

// A fault-injecting TCP proxy between one replica and Redis.
//
// Modes: pass (forward), cut (close every connection and refuse new
// ones: the peer sees resets at once), blackhole (accept and keep
// connections but forward nothing: the peer sees timeouts), hold (keep
// everything sent, in order, and deliver it when the mode changes back,
// even to connections the client has given up on: a request stuck in
// the network that arrives late), plus a per-direction delay that
// applies in pass mode.

import (
	"net"
	"sync"
	"testing"
	"time"
)

// ProxyMode is what the proxy does with traffic.
type ProxyMode int

const (
	ModePass ProxyMode = iota
	ModeCut
	ModeBlackhole
	ModeHold
)

func (m ProxyMode) String() string {
	return [...]string{"pass", "cut", "blackhole", "hold"}[m]
}

// Proxy forwards 127.0.0.1:<port> to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  ProxyMode
	delay time.Duration
	conns map[*pipe]struct{}
	done  bool
	// running counts the accept loop and the connections' goroutines, so
	// that Close returns only when they have all ended.
	running sync.WaitGroup
}

type pipe struct {
	client, server net.Conn
	once           sync.Once
}

func (p *pipe) close() {
	p.once.Do(func() {
		p.client.Close()
		if p.server != nil {
			p.server.Close()
		}
	})
}

// StartProxy starts a proxy to target; it is closed at the end of the
// test.
func StartProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pipe]struct{}{}}
	p.running.Add(1)
	go func() {
		defer p.running.Done()
		p.accept()
	}()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's listening address; URL the Redis URL through it.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }
func (p *Proxy) URL() string  { return "redis://" + p.Addr() + "/0" }

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done = true
	conns := p.conns
	p.conns = map[*pipe]struct{}{}
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.close()
	}
	p.running.Wait()
}

// Mode returns the current mode.
func (p *Proxy) Mode() ProxyMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode switches the mode. Entering cut closes every connection;
// leaving blackhole closes the connections whose traffic was dropped (a
// byte stream with holes cannot be resumed), so clients reconnect.
func (p *Proxy) SetMode(m ProxyMode) {
	p.mu.Lock()
	prev := p.mode
	p.mode = m
	var drop []*pipe
	if m == ModeCut || (prev == ModeBlackhole && m != ModeBlackhole) {
		for c := range p.conns {
			drop = append(drop, c)
		}
		p.conns = map[*pipe]struct{}{}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
}

// Reset closes every current connection (clients reconnect), keeping
// the mode and the delay.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*pipe]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.close()
	}
}

// SetDelay adds d of latency to each direction (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *Proxy) state() (ProxyMode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		mode, _ := p.state()
		switch mode {
		case ModeCut:
			c.Close()
			continue
		case ModeBlackhole:
			pp := &pipe{client: c}
			if !p.track(pp) {
				return
			}
			p.running.Add(1)
			go func() { // swallow what the client sends; never answer
				defer p.running.Done()
				drain(c)
			}()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		pp := &pipe{client: c, server: s}
		if !p.track(pp) {
			return
		}
		p.running.Add(2)
		go func() { defer p.running.Done(); p.pump(pp, c, s) }()
		go func() { defer p.running.Done(); p.pump(pp, s, c) }()
	}
}

func (p *Proxy) track(pp *pipe) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		pp.close()
		return false
	}
	p.conns[pp] = struct{}{}
	return true
}

func (p *Proxy) untrack(pp *pipe) {
	p.mu.Lock()
	delete(p.conns, pp)
	p.mu.Unlock()
	pp.close()
}

func drain(c net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst: in blackhole mode it drops what it reads; in
// hold mode it keeps it until the mode changes; with a delay each chunk
// is written delay after it was read (order kept).
func (p *Proxy) pump(pp *pipe, src, dst net.Conn) {
	defer p.untrack(pp)
	q := make(chan chunk, 4096)
	writerDone := make(chan struct{})
	held := false
	go func() {
		defer close(writerDone)
		for c := range q {
			for p.Mode() == ModeHold {
				held = true
				time.Sleep(5 * time.Millisecond)
			}
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				pp.close()
				for range q { //nolint:revive // drain
				}
				return
			}
		}
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			mode, delay := p.state()
			if mode == ModePass || mode == ModeHold {
				b := append([]byte(nil), buf[:n]...)
				q <- chunk{b: b, due: time.Now().Add(delay)}
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-writerDone
	if held {
		// Delivered late to a connection whose client may be gone: give
		// the server time to execute it before the close.
		time.Sleep(500 * time.Millisecond)
	}
}
