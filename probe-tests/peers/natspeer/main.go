// natspeer is a test peer for the natsprobe end-to-end tests. It plays the
// real NATS client of a pod (the way Bento and Go consumers use nats.go) and
// reports what happens to it as one event per line on stdout.
//
// Build (offline, Debian's packaged nats.go 1.22.1):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o /tmp/natspeer .
//
// See README.md for subcommands, flags and the event lines.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// ---------------------------------------------------------------------------
// Output

type eventWriter struct {
	mu       sync.Mutex
	muted    bool // set once we are exiting on a signal
	lastErr  string
	lastErrT time.Time
}

var out eventWriter

// emit writes one line to stdout in a single write (os.Stdout is unbuffered,
// so the line is flushed immediately).
func (w *eventWriter) emit(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.muted {
		return
	}
	os.Stdout.WriteString(line + "\n")
}

func (w *eventWriter) mute() {
	w.mu.Lock()
	w.muted = true
	w.mu.Unlock()
}

func event(format string, args ...interface{}) {
	out.emit(fmt.Sprintf(format, args...))
}

// errorEvent prints "error <text>". A line identical to the previous error
// line printed less than a second ago is suppressed, so a tight retry loop
// against a dead or closed connection cannot flood stdout.
func errorEvent(format string, args ...interface{}) {
	text := oneLine(fmt.Sprintf(format, args...))
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.muted {
		return
	}
	now := time.Now()
	if text == out.lastErr && now.Sub(out.lastErrT) < time.Second {
		return
	}
	out.lastErr, out.lastErrT = text, now
	os.Stdout.WriteString("error " + text + "\n")
}

func fatal(format string, args ...interface{}) {
	out.emit("fatal " + oneLine(fmt.Sprintf(format, args...)))
	os.Exit(1)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ---------------------------------------------------------------------------
// Dialer that remembers the local address of the last connection it made.

type recordingDialer struct {
	d    net.Dialer
	mu   sync.Mutex
	last string
}

func (r *recordingDialer) Dial(network, address string) (net.Conn, error) {
	c, err := r.d.Dial(network, address)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.last = c.LocalAddr().String() // TCPAddr.String uses JoinHostPort: [::1]:54321
	r.mu.Unlock()
	return c, nil
}

func (r *recordingDialer) lastLocal() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// ---------------------------------------------------------------------------
// Common flags / connection

type common struct {
	url           string
	name          string
	maxReconnects int
	reconnectWait time.Duration
	retryConnect  bool
	user          string
	password      string
	token         string
	creds         string
	nkey          string
	tlsCA         string
	tlsCert       string
	tlsKey        string
	timeout       time.Duration
	forkEvery     time.Duration
	domain        string
	localPort     int
	noRandomize   bool
	pingInterval  time.Duration
	listen        string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", nats.DefaultURL, "server URL(s), comma separated")
	fs.StringVar(&c.name, "name", "natspeer", "client name")
	fs.IntVar(&c.maxReconnects, "max-reconnects", nats.DefaultMaxReconnect, "max reconnect attempts (-1 = forever)")
	fs.DurationVar(&c.reconnectWait, "reconnect-wait", nats.DefaultReconnectWait, "wait between reconnect rounds")
	fs.BoolVar(&c.retryConnect, "retry-on-failed-connect", false, "keep retrying if the initial connect fails")
	fs.StringVar(&c.user, "user", "", "user")
	fs.StringVar(&c.password, "password", "", "password")
	fs.StringVar(&c.token, "token", "", "token")
	fs.StringVar(&c.creds, "creds", "", "credentials file")
	fs.StringVar(&c.nkey, "nkey", "", "nkey seed file")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "CA certificate file")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "client certificate file")
	fs.StringVar(&c.tlsKey, "tls-key", "", "client key file")
	fs.DurationVar(&c.timeout, "timeout", nats.DefaultTimeout, "connect timeout (info: also the request timeout)")
	fs.DurationVar(&c.forkEvery, "fork-every", 0, "start a short-lived worker (this program, same name) this often, as a forking app does (0 = never)")
	fs.StringVar(&c.domain, "domain", "", "JetStream domain (nats.Domain): the API of another domain, e.g. the hub's from a leaf node")
	fs.IntVar(&c.localPort, "local-port", 0, "connect from this local port (SO_REUSEADDR), so a reconnect reuses the same address pair (0 = any)")
	fs.BoolVar(&c.noRandomize, "no-randomize", false, "try the -url list in its order (nats.DontRandomize), so a test knows which server a client starts on")
	fs.DurationVar(&c.pingInterval, "ping-interval", nats.DefaultPingInterval, "how often the client pings the server (nats.PingInterval); MaxPingsOut stays 2")
	fs.StringVar(&c.listen, "listen", "", "also listen on this TCP address and accept every connection, as an app's own HTTP port does (what a tcpSocket probe connects to)")
}

// listenForProbes accepts and closes every connection on addr, for as long as the process
// lives, whatever its NATS client does: a tcpSocket probe's view of the pod.
func listenForProbes(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fatal("listen: %v", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// jsOptions are the JetStream context's options: the domain, when one is named.
func (c *common) jsOptions() []nats.JSOpt {
	if c.domain == "" {
		return nil
	}
	return []nats.JSOpt{nats.Domain(c.domain)}
}

// forkWorkers starts `<this program> pause` every `every`: each lives 10ms and exits, so
// processes with the client's name come and go all the time.
func forkWorkers(every time.Duration) {
	for range time.Tick(every) {
		cmd := exec.Command(os.Args[0], "pause")
		if err := cmd.Start(); err != nil {
			errorEvent("fork: %v", err)
			continue
		}
		go cmd.Wait()
	}
}

// baseOptions are the options shared by every mode, info included: identity,
// auth, TLS and connect timeout. Nothing else is changed from nats.go's defaults.
func (c *common) baseOptions() []nats.Option {
	opts := []nats.Option{nats.Name(c.name), nats.Timeout(c.timeout)}
	if c.user != "" || c.password != "" {
		opts = append(opts, nats.UserInfo(c.user, c.password))
	}
	if c.token != "" {
		opts = append(opts, nats.Token(c.token))
	}
	if c.creds != "" {
		opts = append(opts, nats.UserCredentials(c.creds))
	}
	if c.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(c.nkey)
		if err != nil {
			fatal("nkey: %v", err)
		}
		opts = append(opts, o)
	}
	if c.tlsCA != "" {
		opts = append(opts, nats.RootCAs(c.tlsCA))
	}
	if c.tlsCert != "" || c.tlsKey != "" {
		if c.tlsCert == "" || c.tlsKey == "" {
			fatal("-tls-cert and -tls-key must be given together")
		}
		opts = append(opts, nats.ClientCert(c.tlsCert, c.tlsKey))
	}
	return opts
}

// peer is a connected client with its event handlers installed.
type peer struct {
	nc        *nats.Conn
	dialer    *recordingDialer
	connected chan struct{} // closed once the first connection is established

	mu            sync.Mutex
	everConnected bool
}

func (p *peer) markConnected(nc *nats.Conn) {
	p.mu.Lock()
	first := !p.everConnected
	p.everConnected = true
	p.mu.Unlock()
	if first {
		event("connected %s", p.dialer.lastLocal())
	} else {
		event("reconnected %s", p.dialer.lastLocal())
	}
	event("server %s", nc.ConnectedServerName())
	if first {
		close(p.connected)
	}
}

// connect connects with the event handlers installed and waits until the
// first connection is established (with -retry-on-failed-connect that may be
// long after nats.Connect returned). A failed initial connect is fatal.
func connect(c *common) *peer {
	d := net.Dialer{Timeout: c.timeout}
	if c.localPort != 0 {
		d.LocalAddr = &net.TCPAddr{Port: c.localPort}
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var err error
			rc.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			})
			return err
		}
	}
	p := &peer{
		dialer:    &recordingDialer{d: d},
		connected: make(chan struct{}),
	}
	opts := c.baseOptions()
	opts = append(opts,
		nats.SetCustomDialer(p.dialer),
		nats.MaxReconnects(c.maxReconnects),
		nats.ReconnectWait(c.reconnectWait),
		nats.RetryOnFailedConnect(c.retryConnect),
		nats.PingInterval(c.pingInterval),
		// Fired only when the initial connect succeeded inside nats.Connect.
		nats.ConnectHandler(func(nc *nats.Conn) { p.markConnected(nc) }),
		// With RetryOnFailedConnect the first successful connect is reported
		// by nats.go as a reconnect; markConnected prints "connected" then.
		nats.ReconnectHandler(func(nc *nats.Conn) { p.markConnected(nc) }),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { event("disconnected") }),
		nats.ClosedHandler(func(*nats.Conn) { event("closed") }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				errorEvent("%v (subscription %q)", err, sub.Subject)
			} else {
				errorEvent("%v", err)
			}
		}),
	)
	if c.noRandomize {
		opts = append(opts, nats.DontRandomize())
	}
	if c.listen != "" {
		listenForProbes(c.listen)
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		fatal("connect: %v", err)
	}
	p.nc = nc
	setNC(nc)
	<-p.connected
	if c.forkEvery > 0 {
		go forkWorkers(c.forkEvery)
	}
	return p
}

// ---------------------------------------------------------------------------
// Signals

var (
	ncMu     sync.Mutex
	globalNC *nats.Conn
	onExit   func() // optional last words before exit (publish count)

	wedgeCh = make(chan bool, 16)    // SIGUSR1 -> true, SIGUSR2 -> false
	dropCh  = make(chan struct{}, 1) // SIGHUP: drop the subscription, keep the connection
)

func setNC(nc *nats.Conn) {
	ncMu.Lock()
	globalNC = nc
	ncMu.Unlock()
}

func handleSignals() {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	go func() {
		for s := range ch {
			switch s {
			case syscall.SIGUSR1:
				select {
				case wedgeCh <- true:
				default:
				}
			case syscall.SIGHUP:
				select {
				case dropCh <- struct{}{}:
				default:
				}
			case syscall.SIGUSR2:
				select {
				case wedgeCh <- false:
				default:
				}
			default: // SIGTERM / SIGINT: drain nothing, close, exit 0.
				ncMu.Lock()
				nc, last := globalNC, onExit
				ncMu.Unlock()
				if last != nil {
					last()
				}
				out.mute() // the ClosedHandler must not print "closed" here
				if nc != nil {
					nc.Close()
				}
				os.Exit(0)
			}
		}
	}()
}

// ---------------------------------------------------------------------------
// Subcommands

// cmdConn holds a connection, and with -subscribe SUBJECT[@QUEUE] a core subscription
// (what a WebSocket journal fan-out holds); SIGHUP drops the subscription and keeps the
// connection.
func cmdConn(c *common, subscribe string, echo bool) {
	p := connect(c)
	if subscribe != "" {
		subject, queue := subscribe, ""
		if i := strings.LastIndex(subscribe, "@"); i >= 0 {
			subject, queue = subscribe[:i], subscribe[i+1:]
		}
		handle := func(m *nats.Msg) {
			if echo && m.Reply != "" {
				m.Respond(m.Data)
			}
		}
		var sub *nats.Subscription
		var err error
		if queue != "" {
			sub, err = p.nc.QueueSubscribe(subject, queue, handle)
		} else {
			sub, err = p.nc.Subscribe(subject, handle)
		}
		if err != nil {
			fatal("subscribe: %v", err)
		}
		p.nc.Flush()
		go dropOnSignal(p.nc, sub)
	}
	event("ready")
	select {}
}

// dropOnSignal unsubscribes on SIGHUP, keeping the connection: a replica gone deaf.
func dropOnSignal(nc *nats.Conn, sub *nats.Subscription) {
	<-dropCh
	if err := sub.Unsubscribe(); err != nil {
		errorEvent("unsubscribe: %v", err)
		return
	}
	nc.Flush()
	event("unsubscribed")
}

// cmdMany holds -n idle connections to the server: a busy server's other clients.
func cmdMany(c *common, fs *flag.FlagSet, args []string) {
	n := fs.Int("n", 2000, "connections")
	subscribe := fs.String("subscribe", "", "each connection subscribes to SUBJECT.<i> (none if empty)")
	parse(fs, args)
	var conns []*nats.Conn
	for i := 0; i < *n; i++ {
		opts := append(c.baseOptions(), nats.Name(fmt.Sprintf("idle-%d", i)), nats.MaxReconnects(-1))
		nc, err := nats.Connect(c.url, opts...)
		if err != nil {
			fatal("connect %d: %v", i, err)
		}
		if *subscribe != "" {
			if _, err := nc.SubscribeSync(fmt.Sprintf("%s.%d", *subscribe, i)); err != nil {
				fatal("subscribe %d: %v", i, err)
			}
		}
		conns = append(conns, nc)
	}
	event("ready %d", len(conns))
	select {}
}

func cmdSetup(c *common, fs *flag.FlagSet, args []string) {
	stream := fs.String("stream", "", "stream name (AddStream if given)")
	subjects := fs.String("subjects", "", "stream subjects, comma separated")
	maxBytes := fs.Int64("max-bytes", -1, "stream max bytes (-1 = unlimited)")
	maxMsgs := fs.Int64("max-msgs", -1, "stream max msgs (-1 = unlimited)")
	discard := fs.String("discard", "old", "discard policy: old|new")
	storage := fs.String("storage", "file", "storage: file|memory")
	durable := fs.String("durable", "", "durable consumer name (AddConsumer if given)")
	deliverSubject := fs.String("deliver-subject", "", "push consumer deliver subject (pull consumer if empty)")
	deliverGroup := fs.String("deliver-group", "", "push consumer deliver group")
	maxAckPending := fs.Int("max-ack-pending", 0, "max ack pending (0 = server default)")
	ackWait := fs.Duration("ack-wait", 0, "ack wait (0 = server default)")
	ackPolicy := fs.String("ack-policy", "explicit", "ack policy: explicit|none|all")
	filterSubject := fs.String("filter-subject", "", "consumer filter subject")
	deliverPolicy := fs.String("deliver-policy", "all", "deliver policy: all|new")
	retention := fs.String("retention", "limits", "stream retention: limits|interest|workqueue")
	maxAge := fs.Duration("max-age", 0, "stream max age (0 = unlimited)")
	maxPerSubject := fs.Int64("max-msgs-per-subject", 0, "stream max msgs per subject (0 = unlimited)")
	discardNewPerSubject := fs.Bool("discard-new-per-subject", false, "with -discard new: refuse per subject too")
	maxDeliver := fs.Int("max-deliver", 0, "consumer max deliver (0 = unlimited)")
	replicas := fs.Int("replicas", 1, "stream replicas (a cluster)")
	rateLimit := fs.Uint64("rate-limit", 0, "push consumer rate_limit_bps (0 = none): the server holds deliveries past it")
	parse(fs, args)

	scfg := &nats.StreamConfig{Name: *stream, MaxBytes: *maxBytes, MaxMsgs: *maxMsgs,
		MaxAge: *maxAge, MaxMsgsPerSubject: *maxPerSubject, DiscardNewPerSubject: *discardNewPerSubject,
		Replicas: *replicas}
	switch *retention {
	case "limits":
		scfg.Retention = nats.LimitsPolicy
	case "interest":
		scfg.Retention = nats.InterestPolicy
	case "workqueue":
		scfg.Retention = nats.WorkQueuePolicy
	default:
		fatal("bad -retention %q", *retention)
	}
	if *subjects != "" {
		scfg.Subjects = splitList(*subjects)
	}
	switch *discard {
	case "old":
		scfg.Discard = nats.DiscardOld
	case "new":
		scfg.Discard = nats.DiscardNew
	default:
		fatal("bad -discard %q", *discard)
	}
	switch *storage {
	case "file":
		scfg.Storage = nats.FileStorage
	case "memory":
		scfg.Storage = nats.MemoryStorage
	default:
		fatal("bad -storage %q", *storage)
	}
	ccfg := &nats.ConsumerConfig{
		Durable:        *durable,
		DeliverSubject: *deliverSubject,
		DeliverGroup:   *deliverGroup,
		MaxAckPending:  *maxAckPending,
		AckWait:        *ackWait,
		FilterSubject:  *filterSubject,
		MaxDeliver:     *maxDeliver,
		RateLimit:      *rateLimit,
	}
	switch *ackPolicy {
	case "explicit":
		ccfg.AckPolicy = nats.AckExplicitPolicy
	case "none":
		ccfg.AckPolicy = nats.AckNonePolicy
	case "all":
		ccfg.AckPolicy = nats.AckAllPolicy
	default:
		fatal("bad -ack-policy %q", *ackPolicy)
	}
	switch *deliverPolicy {
	case "all":
		ccfg.DeliverPolicy = nats.DeliverAllPolicy
	case "new":
		ccfg.DeliverPolicy = nats.DeliverNewPolicy
	default:
		fatal("bad -deliver-policy %q", *deliverPolicy)
	}
	if *durable != "" && *stream == "" {
		fatal("-durable needs -stream")
	}

	p := connect(c)
	js, err := p.nc.JetStream(c.jsOptions()...)
	if err != nil {
		fatal("jetstream: %v", err)
	}
	if *stream != "" {
		if _, err := js.AddStream(scfg); err != nil {
			if !errors.Is(err, nats.ErrStreamNameAlreadyInUse) {
				fatal("add stream: %v", err)
			}
			// Without -subjects (e.g. "setup -stream S -durable D" to add a
			// consumer) an existing stream is left alone rather than having
			// its subjects reset to the stream name.
			if scfg.Subjects != nil {
				if _, err := js.UpdateStream(scfg); err != nil {
					fatal("update stream: %v", err)
				}
			}
		}
	}
	if *durable != "" {
		if _, err := js.AddConsumer(*stream, ccfg); err != nil {
			if !consumerExists(err) {
				fatal("add consumer: %v", err)
			}
			if _, err := js.UpdateConsumer(*stream, ccfg); err != nil {
				fatal("update consumer: %v", err)
			}
		}
	}
	event("ready")
	out.mute()
	p.nc.Close()
	os.Exit(0)
}

func consumerExists(err error) bool {
	if errors.Is(err, nats.ErrConsumerNameAlreadyInUse) {
		return true
	}
	var apiErr *nats.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case nats.JSErrCodeConsumerNameExists, nats.JSErrCodeConsumerAlreadyExists:
			return true
		}
	}
	return strings.Contains(err.Error(), "already in use") || strings.Contains(err.Error(), "already exists")
}

// consumer holds the acking state of the consume subcommand.
type consumer struct {
	work        time.Duration
	ackMode     bool          // false with -ack never
	nak         bool          // -ack nak: reject every message
	poison      uint64        // -poison: the stream sequence NAKed with -nak-delay instead of acked
	nakDelay    time.Duration // -nak-delay
	chain       string
	nc          *nats.Conn
	wedgeAfter  int64
	reportEvery int64

	acked     int64
	wedged    int32 // atomic
	wedgeOnce sync.Once
}

func (k *consumer) setWedged(w bool) {
	if w {
		atomic.StoreInt32(&k.wedged, 1)
		event("wedged")
	} else {
		atomic.StoreInt32(&k.wedged, 0)
		event("unwedged")
	}
}

// handle processes one message; callers guarantee one at a time.
func (k *consumer) handle(m *nats.Msg) {
	if m.Reply == "" { // heartbeat / flow-control status messages etc.
		return
	}
	if k.work > 0 {
		time.Sleep(k.work)
	}
	if k.nak {
		if err := m.Nak(); err != nil {
			errorEvent("nak: %v", err)
		}
		return
	}
	if k.poison > 0 {
		if meta, err := m.Metadata(); err == nil && meta.Sequence.Stream == k.poison {
			if err := m.NakWithDelay(k.nakDelay); err != nil {
				errorEvent("nak: %v", err)
				return
			}
			event("poisoned %d", k.poison)
			return
		}
	}
	if !k.ackMode || atomic.LoadInt32(&k.wedged) == 1 {
		return
	}
	if k.chain != "" {
		// The next message only once the server has this ack: a stream that keeps one
		// message never deletes one unacknowledged.
		if err := m.AckSync(); err != nil {
			errorEvent("ack: %v", err)
			return
		}
		if err := k.nc.Publish(k.chain, []byte("next")); err != nil {
			errorEvent("chain: %v", err)
		}
	} else if err := m.Ack(); err != nil {
		errorEvent("ack: %v", err)
		return
	}
	n := atomic.AddInt64(&k.acked, 1)
	if n == 1 || (k.reportEvery > 0 && n%k.reportEvery == 0) {
		event("acked %d", n)
	}
	if k.wedgeAfter > 0 && n >= k.wedgeAfter {
		k.wedgeOnce.Do(func() { k.setWedged(true) })
	}
}

func cmdConsume(c *common, fs *flag.FlagSet, args []string) {
	stream := fs.String("stream", "", "stream name")
	durable := fs.String("durable", "", "durable consumer name")
	deliverSubject := fs.String("deliver-subject", "", "push: deliver subject to subscribe to")
	deliverGroup := fs.String("deliver-group", "", "push: queue group (QueueSubscribe when set)")
	pull := fs.Bool("pull", false, "pull consumer: PullSubscribe with Bind(stream, durable) and a Fetch loop")
	filterSubject := fs.String("filter-subject", "", "pull: subject passed to PullSubscribe (must equal the consumer's filter subject if it has one)")
	batch := fs.Int("batch", 1, "pull: fetch batch size")
	fetchWait := fs.Duration("fetch-wait", time.Second, "pull: fetch max wait")
	ack := fs.String("ack", "ack", "ack|never|nak")
	work := fs.Duration("work", 0, "time spent per message before acking")
	wedgeAfter := fs.Int64("wedge-after", 0, "stop acking after N acks (0 = never)")
	reportEvery := fs.Int64("report-every", 100, "print 'acked <n>' every N acks")
	poison := fs.Uint64("poison", 0, "NAK the message at this stream sequence with -nak-delay (NakWithDelay) each time it comes, instead of acking it (0 = none)")
	nakDelay := fs.Duration("nak-delay", time.Hour, "with -poison: the NAK's delay before the server delivers it again")
	chain := fs.String("chain", "", "after each ack (synchronous), publish one message to this subject")
	create := fs.Bool("create", false, "push: create the durable -stream/-durable (deliver policy new) when it does not exist, as Bento's input does at start")
	createAckWait := fs.Duration("create-ack-wait", 0, "with -create: the durable's ack wait (0 = server default)")
	createMaxAckPending := fs.Int("create-max-ack-pending", 0, "with -create: the durable's max ack pending (0 = server default)")
	parse(fs, args)

	k := &consumer{work: *work, wedgeAfter: *wedgeAfter, reportEvery: *reportEvery, chain: *chain,
		poison: *poison, nakDelay: *nakDelay}
	switch *ack {
	case "ack":
		k.ackMode = true
	case "never":
		k.ackMode = false
	case "nak":
		k.nak = true
	default:
		fatal("bad -ack %q", *ack)
	}
	if *pull && (*stream == "" || *durable == "") {
		fatal("-pull needs -stream and -durable")
	}
	if !*pull && *deliverSubject == "" && (*stream == "" || *durable == "") {
		fatal("need -deliver-subject (push), or -pull with -stream and -durable")
	}

	p := connect(c)
	k.nc = p.nc
	go func() {
		for w := range wedgeCh {
			if k.ackMode { // -ack never never acks: SIGUSR1/SIGUSR2 are ignored
				k.setWedged(w)
			}
		}
	}()

	if *create {
		if *pull || *stream == "" || *durable == "" || *deliverSubject == "" {
			fatal("-create needs a push consumer: -stream, -durable and -deliver-subject")
		}
		ensureConsumer(c, p.nc, *stream, &nats.ConsumerConfig{
			Durable:        *durable,
			DeliverSubject: *deliverSubject,
			DeliverGroup:   *deliverGroup,
			DeliverPolicy:  nats.DeliverNewPolicy,
			AckPolicy:      nats.AckExplicitPolicy,
			AckWait:        *createAckWait,
			MaxAckPending:  *createMaxAckPending,
		})
	}
	if !*pull {
		subj, group := *deliverSubject, *deliverGroup
		if subj == "" {
			// Not in the spec: look the push consumer's deliver subject up.
			js, err := p.nc.JetStream(c.jsOptions()...)
			if err != nil {
				fatal("jetstream: %v", err)
			}
			info, err := js.ConsumerInfo(*stream, *durable)
			if err != nil {
				fatal("consumer info: %v", err)
			}
			if info.Config.DeliverSubject == "" {
				fatal("consumer %s is a pull consumer; use -pull", *durable)
			}
			subj = info.Config.DeliverSubject
			if group == "" {
				group = info.Config.DeliverGroup
			}
		}
		var sub *nats.Subscription
		var err error
		if group != "" {
			sub, err = p.nc.QueueSubscribe(subj, group, k.handle)
		} else {
			sub, err = p.nc.Subscribe(subj, k.handle)
		}
		if err != nil {
			fatal("subscribe: %v", err)
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			fatal("set pending limits: %v", err)
		}
		go dropOnSignal(p.nc, sub)
		if err := p.nc.Flush(); err != nil {
			errorEvent("flush: %v", err)
		}
		event("ready")
		select {}
	}

	js, err := p.nc.JetStream(c.jsOptions()...)
	if err != nil {
		fatal("jetstream: %v", err)
	}
	sub, err := js.PullSubscribe(*filterSubject, *durable, nats.Bind(*stream, *durable))
	if errors.Is(err, nats.ErrSubjectMismatch) && *filterSubject == "" {
		// nats.go 1.22.1 wants the consumer's filter subject as the
		// subject when binding to a filtered pull consumer: look it up.
		if info, ierr := js.ConsumerInfo(*stream, *durable); ierr == nil {
			sub, err = js.PullSubscribe(info.Config.FilterSubject, *durable, nats.Bind(*stream, *durable))
		}
	}
	if err != nil {
		fatal("pull subscribe: %v", err)
	}
	event("ready")
	for {
		msgs, err := sub.Fetch(*batch, nats.MaxWait(*fetchWait))
		if err != nil {
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
				continue
			}
			errorEvent("fetch: %v", err)
			time.Sleep(*fetchWait)
			continue
		}
		for _, m := range msgs {
			k.handle(m)
		}
	}
}

// ensureConsumer creates the durable unless it exists, asking again while JetStream is not
// answering (a cluster electing after a restart), for up to a minute. As nats.go's
// js.Subscribe does, it asks for the durable's info first and creates it only when it is not
// found: binding to an existing durable needs its own leader, not the meta leader.
func ensureConsumer(c *common, nc *nats.Conn, stream string, cfg *nats.ConsumerConfig) {
	js, err := nc.JetStream(c.jsOptions()...)
	if err != nil {
		fatal("jetstream: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := js.ConsumerInfo(stream, cfg.Durable)
		if err == nil {
			return
		}
		if errors.Is(err, nats.ErrConsumerNotFound) {
			_, err = js.AddConsumer(stream, cfg)
		}
		if err == nil || consumerExists(err) {
			return
		}
		if time.Now().After(deadline) {
			fatal("add consumer: %v", err)
		}
		errorEvent("add consumer: %v", err)
		time.Sleep(250 * time.Millisecond)
	}
}

func cmdPublish(c *common, fs *flag.FlagSet, args []string) {
	subject := fs.String("subject", "", "subject to publish to")
	rate := fs.Float64("rate", 100, "messages per second (0 = as fast as possible)")
	count := fs.Int64("count", 0, "messages to publish, then exit (0 = until killed)")
	size := fs.Int("size", 64, "payload size in bytes")
	useJS := fs.Bool("js", false, "publish with js.Publish and wait for each ack")
	parse(fs, args)
	if *subject == "" {
		fatal("-subject is required")
	}
	if *size < 0 || *rate < 0 || *count < 0 {
		fatal("-size, -rate and -count must be >= 0")
	}

	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}

	p := connect(c)
	var js nats.JetStreamContext
	if *useJS {
		var err error
		if js, err = p.nc.JetStream(c.jsOptions()...); err != nil {
			fatal("jetstream: %v", err)
		}
	}
	var published int64
	ncMu.Lock()
	onExit = func() { event("published %d", atomic.LoadInt64(&published)) }
	ncMu.Unlock()
	event("ready")

	// Pacing by deadline: message i (counted from start) is due at
	// start + i/rate, so sleep overshoot is caught up on the next messages.
	// If we fall more than a second behind (e.g. a js.Publish blocked while
	// the server was down) the schedule restarts instead of bursting.
	var interval time.Duration
	if *rate > 0 {
		interval = time.Duration(float64(time.Second) / *rate)
	}
	start := time.Now()
	var tick int64
	var sinceFlush int
	for *count == 0 || published < *count {
		if interval > 0 {
			due := start.Add(time.Duration(float64(tick) * float64(time.Second) / *rate))
			now := time.Now()
			if d := due.Sub(now); d > 0 {
				time.Sleep(d)
			} else if -d > time.Second {
				start, tick = now, 0
			}
			tick++
		}
		var err error
		if *useJS {
			_, err = js.Publish(*subject, payload)
		} else {
			err = p.nc.Publish(*subject, payload)
		}
		if err != nil {
			errorEvent("publish: %v", err)
			if interval == 0 || p.nc.IsClosed() {
				// Avoid a hot loop against a dead/closed connection.
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		n := atomic.AddInt64(&published, 1)
		if !*useJS {
			sinceFlush++
			if sinceFlush >= 100 {
				sinceFlush = 0
				if err := p.nc.Flush(); err != nil {
					errorEvent("flush: %v", err)
				}
			}
		}
		if n%1000 == 0 && (*count == 0 || n != *count) {
			event("published %d", n)
		}
	}
	if !*useJS {
		if err := p.nc.Flush(); err != nil {
			errorEvent("flush: %v", err)
		}
	}
	ncMu.Lock()
	onExit = nil
	ncMu.Unlock()
	event("published %d", published)
	out.mute()
	p.nc.Close()
	os.Exit(0)
}

// cmdInfo is the benchmark peer: connect, one raw CONSUMER.INFO request,
// print the body, close. No handlers, no JetStream context, no extra trips.
func cmdInfo(c *common, fs *flag.FlagSet, args []string) {
	stream := fs.String("stream", "", "stream name")
	durable := fs.String("durable", "", "durable consumer name")
	parse(fs, args)
	if *stream == "" || *durable == "" {
		fatal("-stream and -durable are required")
	}
	nc, err := nats.Connect(c.url, c.baseOptions()...)
	if err != nil {
		fatal("connect: %v", err)
	}
	msg, err := nc.Request("$JS.API.CONSUMER.INFO."+*stream+"."+*durable, nil, c.timeout)
	if err != nil {
		nc.Close()
		fatal("request: %v", err)
	}
	os.Stdout.Write(append(append([]byte(nil), msg.Data...), '\n'))
	nc.Close()
	os.Exit(0)
}

// cmdRequest: one raw request (e.g. a JetStream API call with a JSON body), the answer
// printed as one line. For what the tests do that setup does not (pausing a consumer).
func cmdRequest(c *common, fs *flag.FlagSet, args []string) {
	subject := fs.String("subject", "", "subject to request")
	data := fs.String("data", "", "request body")
	parse(fs, args)
	if *subject == "" {
		fatal("-subject is required")
	}
	nc, err := nats.Connect(c.url, c.baseOptions()...)
	if err != nil {
		fatal("connect: %v", err)
	}
	msg, err := nc.Request(*subject, []byte(*data), c.timeout)
	if err != nil {
		nc.Close()
		fatal("request: %v", err)
	}
	os.Stdout.Write(append(append([]byte(nil), msg.Data...), '\n'))
	nc.Close()
	os.Exit(0)
}

// cmdPinPull is a pull client of a consumer with priority groups (nats-server 2.11+), in raw
// JetStream API requests, which nats.go 1.22.1 predates: one message a request
// (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`, `{"batch":1,"expires":…,"group":…}`), each
// acked; once the server pins it (the `Nats-Pin-Id` header of a message) its later requests
// carry that id, and a request refused for a wrong id (423) pulls again without one. After
// -take messages it stops pulling and holds its connection: a pinned client gone quiet.
func cmdPinPull(c *common, fs *flag.FlagSet, args []string) {
	stream := fs.String("stream", "", "stream name")
	durable := fs.String("durable", "", "durable consumer name")
	group := fs.String("group", "", "priority group")
	expires := fs.Duration("expires", 30*time.Second, "each pull request's expiry")
	take := fs.Int64("take", 0, "stop pulling after this many messages, the connection held (0 = never)")
	parse(fs, args)
	if *stream == "" || *durable == "" || *group == "" {
		fatal("-stream, -durable and -group are required")
	}
	p := connect(c)
	inbox := nats.NewInbox()
	msgs := make(chan *nats.Msg, 64)
	if _, err := p.nc.ChanSubscribe(inbox, msgs); err != nil {
		fatal("subscribe: %v", err)
	}
	pin := ""
	pull := func() {
		req := map[string]interface{}{"batch": 1, "expires": expires.Nanoseconds(), "group": *group}
		if pin != "" {
			req["id"] = pin
		}
		body, _ := json.Marshal(req)
		if err := p.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+*stream+"."+*durable, inbox, body); err != nil {
			errorEvent("pull: %v", err)
		}
	}
	event("ready")
	pull()
	var taken int64
	for m := range msgs {
		if status := m.Header.Get("Status"); status != "" {
			// 408: the request expired; 423: the id is not the pinned one.
			if status != "408" {
				event("status %s %s", status, m.Header.Get("Description"))
			}
			if status == "423" {
				pin = ""
			}
			if status != "100" {
				pull()
			}
			continue
		}
		if id := m.Header.Get("Nats-Pin-Id"); id != "" && id != pin {
			pin = id
			event("pinned %s", id)
		}
		if err := m.Ack(); err != nil {
			errorEvent("ack: %v", err)
		}
		taken++
		event("acked %d", taken)
		if *take > 0 && taken >= *take {
			event("stopped pulling")
			select {}
		}
		pull()
	}
}

// cmdBulk creates -streams streams (B000, B001, ... on b000.>, ...) of -consumers pull
// consumers each (c00, c01, ...), in one connection: the guard's 1,000-consumer account.
func cmdBulk(c *common, fs *flag.FlagSet, args []string) {
	streams := fs.Int("streams", 100, "streams to create")
	consumers := fs.Int("consumers", 10, "consumers per stream")
	faulted := fs.Int("faulted", 0, "push consumers on stream F with a message waiting and no subscriber (unbound: a fault)")
	workers := fs.Int("workers", 4, "streams created at once")
	parse(fs, args)
	p := connect(c)
	js, err := p.nc.JetStream(c.jsOptions()...)
	if err != nil {
		fatal("jetstream: %v", err)
	}
	// Streams are created by a few workers at once: 100,000 consumers one round trip at a
	// time take minutes.
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("B%03d", i)
				cfg := &nats.StreamConfig{Name: name, Subjects: []string{fmt.Sprintf("b%03d.>", i)}, Storage: nats.MemoryStorage}
				if _, err := js.AddStream(cfg); err != nil && !errors.Is(err, nats.ErrStreamNameAlreadyInUse) {
					fatal("add stream %s: %v", name, err)
				}
				for j := 0; j < *consumers; j++ {
					ccfg := &nats.ConsumerConfig{Durable: fmt.Sprintf("c%02d", j), AckPolicy: nats.AckExplicitPolicy}
					// A loaded machine (a test suite running alongside) can make the API time
					// out: asked again, a few times, before giving up.
					var err error
					for try := 0; try < 5; try++ {
						if _, err = js.AddConsumer(name, ccfg); err == nil || consumerExists(err) || !(errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)) {
							break
						}
					}
					if err != nil && !consumerExists(err) {
						fatal("add consumer %s/%s: %v", name, ccfg.Durable, err)
					}
				}
			}
		}()
	}
	for i := 0; i < *streams; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if *faulted > 0 {
		cfg := &nats.StreamConfig{Name: "F", Subjects: []string{"f.>"}, Storage: nats.MemoryStorage}
		if _, err := js.AddStream(cfg); err != nil && !errors.Is(err, nats.ErrStreamNameAlreadyInUse) {
			fatal("add stream F: %v", err)
		}
		for j := 0; j < *faulted; j++ {
			d := fmt.Sprintf("f%02d", j)
			ccfg := &nats.ConsumerConfig{Durable: d, AckPolicy: nats.AckExplicitPolicy, DeliverSubject: "deliver." + d, DeliverGroup: d}
			if _, err := js.AddConsumer("F", ccfg); err != nil && !consumerExists(err) {
				fatal("add consumer F/%s: %v", d, err)
			}
		}
		if _, err := js.Publish("f.x", []byte("waiting")); err != nil {
			fatal("publish f.x: %v", err)
		}
	}
	event("ready")
	out.mute()
	p.nc.Close()
	os.Exit(0)
}

// cmdList is the guard benchmark's peer: every consumer of every stream, -repeat times, with
// nats.go's own calls. -mode paged: ConsumersInfo per stream (CONSUMER.LIST, paged by the
// client); -mode adr: the ADR's script, ConsumerNames then one ConsumerInfo per durable, in
// sequence. Prints how many consumers it saw in the last round.
func cmdList(c *common, fs *flag.FlagSet, args []string) {
	mode := fs.String("mode", "paged", "paged|adr")
	repeat := fs.Int("repeat", 2, "rounds")
	parse(fs, args)
	nc, err := nats.Connect(c.url, c.baseOptions()...)
	if err != nil {
		fatal("connect: %v", err)
	}
	js, err := nc.JetStream(c.jsOptions()...)
	if err != nil {
		fatal("jetstream: %v", err)
	}
	seen := 0
	for r := 0; r < *repeat; r++ {
		seen = 0
		for stream := range js.StreamNames() {
			switch *mode {
			case "paged":
				for range js.ConsumersInfo(stream) {
					seen++
				}
			case "adr":
				for name := range js.ConsumerNames(stream) {
					if _, err := js.ConsumerInfo(stream, name); err != nil {
						fatal("consumer info %s/%s: %v", stream, name, err)
					}
					seen++
				}
			default:
				fatal("bad -mode %q", *mode)
			}
		}
	}
	fmt.Println(seen)
	nc.Close()
	os.Exit(0)
}

// ---------------------------------------------------------------------------

func splitList(s string) []string {
	var r []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			r = append(r, p)
		}
	}
	return r
}

func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fatal("flags: %v", err)
	}
	if fs.NArg() > 0 {
		fatal("unexpected arguments: %v", fs.Args())
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: natspeer conn|setup|consume|pin-pull|publish|info|request|flood [flags]  (natspeer <subcommand> -h for flags)")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		fatal("missing subcommand")
	}
	sub, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("natspeer "+sub, flag.ContinueOnError)
	c := &common{}
	c.register(fs)

	if sub == "info" {
		cmdInfo(c, fs, args)
		return
	}
	if sub == "request" {
		cmdRequest(c, fs, args)
		return
	}
	if sub == "list" {
		cmdList(c, fs, args)
		return
	}
	if sub == "flood" {
		cmdFlood(args)
		return
	}
	if sub == "pause" { // a forking app's short-lived worker
		time.Sleep(10 * time.Millisecond)
		return
	}
	handleSignals()
	switch sub {
	case "conn":
		subscribe := fs.String("subscribe", "", "hold a core subscription, SUBJECT[@QUEUE] (SIGHUP drops it)")
		echo := fs.Bool("echo", false, "answer every request on -subscribe with its own body")
		parse(fs, args)
		cmdConn(c, *subscribe, *echo)
	case "many":
		cmdMany(c, fs, args)
	case "setup":
		cmdSetup(c, fs, args)
	case "consume":
		cmdConsume(c, fs, args)
	case "pin-pull":
		cmdPinPull(c, fs, args)
	case "publish":
		cmdPublish(c, fs, args)
	case "bulk":
		cmdBulk(c, fs, args)
	default:
		usage()
		fatal("unknown subcommand %q", sub)
	}
}
