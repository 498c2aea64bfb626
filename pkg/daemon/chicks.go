package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/providers"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/store"
)

// The broker keeps the per-person daily budget the hatchery asks about.
var _ hatchery.UserMeter = (*broker.Broker)(nil)

// chicks is the chick machinery of one Mother process: the broker, the
// hatchery, and the nest's two listeners.
type chicks struct {
	models   *providers.Set
	broker   *broker.Broker
	hatchery *hatchery.Hatchery
	nest     *nest.Server
	// policy decides what isolated chicks reach through their gates.
	policy *egress.Policy
	lis    net.Listener
	// logger is scoped component=hatchery, nestLog component=nest.
	logger  *slog.Logger
	nestLog *slog.Logger
	// stopReconcile ends the reconcile in the background and reconciled
	// is closed when it has (both nil before startReconcile).
	stopReconcile context.CancelFunc
	reconciled    chan struct{}
}

// startChicks opens the broker and the hatchery under <data>/chicks and
// starts the nest: ChickService on grpc.listen (TLS with Mother's own CA;
// with the host tools chicks.hostTools allows), AdminService on the admin
// socket. A grpc.listen port of 0 picks a free port, and the chicks are
// told the real one.
func startChicks(cfg *config.Config, st *store.Store, dk *disk.Monitor, host *hostSide, models *providers.Set, logger *slog.Logger, mx *metrics.Metrics, version string, clk clock.Clock) (*chicks, error) {
	dir := filepath.Join(st.DataDir(), "chicks")
	lis, err := net.Listen("tcp", cfg.GRPC.Listen)
	if err != nil {
		return nil, fmt.Errorf("grpc.listen %s: %w", cfg.GRPC.Listen, err)
	}
	if _, port, _ := net.SplitHostPort(cfg.GRPC.Advertise); port == "0" {
		host, _, _ := net.SplitHostPort(cfg.GRPC.Advertise)
		_, real, _ := net.SplitHostPort(lis.Addr().String())
		cfg.GRPC.Advertise = net.JoinHostPort(host, real)
	}
	br, err := broker.New(broker.Options{
		Config: cfg, Dir: dir, Logger: logger, Metrics: mx, Clock: clk,
		Providers: models.Get, Health: models.Health(), FirstTokenTimeout: models.FirstTokenTimeout(),
	})
	if err != nil {
		lis.Close()
		return nil, err
	}
	// The nest speaks TLS to chicks with a CA of this Mother's own; each
	// chick gets the CA certificate and trusts nothing else.
	tl, err := nest.LoadTLS(filepath.Join(dir, "tls"), clk)
	if err != nil {
		lis.Close()
		br.Close()
		return nil, err
	}
	// The gate secret, next to the nest's keys: the gates' tokens and the
	// isolated chicks' gate keys derive from it (docs/isolation.md).
	gateKeys, err := egress.LoadSecret(filepath.Join(dir, "tls"))
	if err != nil {
		lis.Close()
		br.Close()
		return nil, err
	}
	h, err := hatchery.New(hatchery.Options{Config: cfg, Dir: dir, Dial: openHost(cfg, logger, clk), Clock: clk, Logger: logger, Meter: br, CAPEM: tl.CAPEM, GateKeys: gateKeys, Disk: dk.Err})
	if err != nil {
		lis.Close()
		br.Close()
		return nil, err
	}
	// The metrics count spawns, joins and ends as a lifecycle subscriber.
	h.Subscribe(mx)
	// The gates' side: the same secret (gateKeys); the policy keeps the
	// admins' approvals in DATA/state/egress.json and follows config
	// reloads.
	secret := gateKeys
	policy, err := egress.NewPolicy(egress.Options{
		Config: cfg.Chicks, StateDir: filepath.Join(st.DataDir(), "state"), Logger: logger,
		LoadSent: func(id string) int64 {
			n, err := h.EgressSent(id)
			if err != nil {
				logger.Warn("chick egress log unreadable; its byte count restarts", "chick", id, "err", err)
			}
			return n
		},
	})
	if err != nil {
		lis.Close()
		h.Close()
		br.Close()
		return nil, err
	}
	h.Subscribe(policyEnds{p: policy, logger: logger})
	host.onReload(func(cur *config.Config) { policy.SetConfig(cur.Chicks) })
	hostNames := make([]string, 0, len(cfg.Chicks.Hosts))
	for _, hc := range cfg.Chicks.Hosts {
		hostNames = append(hostNames, hc.Name)
	}
	admin, err := nest.ListenUnix(cfg.Admin.Socket)
	if err != nil {
		lis.Close()
		h.Close()
		br.Close()
		return nil, err
	}
	nlog := logger.With("component", "nest")
	n := nest.New(nest.Options{
		Chicks: h, Models: br, Logger: logger, Version: version, StartedAt: clk.Now(), Clock: clk, KillGrace: cfg.Chicks.KillGrace.Duration,
		ChickImage: cfg.Chicks.Image, TLS: tl.Creds, HostTools: host.chicks, ToolServers: host.tools,
		Gate:  &nest.Gate{Secret: secret, Instance: h.Instance(), Hosts: hostNames, Policy: policy, Metrics: mx},
		Calls: callLimits(cfg),
	})
	go func() {
		if err := n.ServeAdmin(admin); err != nil {
			nlog.Error("admin socket stopped", "err", err)
		}
	}()
	nlog.Info("nest listening", "grpc", lis.Addr().String(), "tls", "mother's CA", "cert_expires", tl.NotAfter.Format(time.DateOnly), "advertise", cfg.GRPC.Advertise, "admin", cfg.Admin.Socket)
	return &chicks{models: models, broker: br, hatchery: h, nest: n, policy: policy, lis: lis, logger: logger.With("component", "hatchery"), nestLog: nlog}, nil
}

// callLimits are config's chicks.calls for the nest (validated: a size
// that does not parse is the nest's default).
func callLimits(cfg *config.Config) nest.CallLimits {
	l := cfg.Chicks.Calls
	req, _ := l.MaxRequestBytesValue()
	img, _ := l.MaxImageBytesValue()
	held, _ := l.MaxHeldBytesValue()
	return nest.CallLimits{MaxRequestBytes: req, MaxImages: l.MaxImagesValue(), MaxImageBytes: img, MaxHeldBytes: held, MaxPerChick: cfg.Chicks.MaxModelCallsPerChick}
}

// openHost is the hatchery's Dial: each configured host's driver by its
// kind. Opening a Kubernetes host with isolated chicks logs that their
// confinement rests on the cluster's network plugin.
func openHost(cfg *config.Config, logger *slog.Logger, clk clock.Clock) func(config.DockerHost) (hatchery.Runtime, error) {
	return func(hc config.DockerHost) (hatchery.Runtime, error) {
		if !hc.IsKubernetes() {
			return docker.Open(hc)
		}
		rt, err := kubernetes.Open(hc, kubernetes.Options{Logger: logger, Clock: clk})
		if err != nil {
			return nil, err
		}
		switch cfg.Chicks.Network {
		case config.NetworkIsolated, config.NetworkNone:
			logger.Warn("chicks on this Kubernetes host are confined by a NetworkPolicy (only Mother's nest); Mother cannot verify that the cluster's network plugin enforces it: Calico, Cilium, Antrea and kube-router do, flannel alone and the bridge plugin do not (docs/kubernetes.md)",
				"host", hc.Name, "namespace", rt.Namespace())
			if len(cfg.Chicks.Egress.Allow) > 0 || len(cfg.Chicks.Egress.Channels) > 0 {
				logger.Warn("chicks.egress does not apply on a Kubernetes host: its chicks reach Mother and nothing else (there is no gate proxy)", "host", hc.Name)
			}
		}
		return rt, nil
	}
}

// startReconcile takes over the chicks a previous Mother left running,
// in the background: Mother is ready for chat without waiting for any
// Docker host (on a Pi the engine is across the network, and a slow or
// unreachable one would hold every chat and systemd's start timeout).
// Chicks asked for meanwhile wait in the queue; a chick reconnecting
// after a restart is answered once Mother knows what became of it (the
// chick listener opens after). A Docker host that does not answer is
// logged; Mother goes on.
func (c *chicks) startReconcile(ctx context.Context) {
	ctx, c.stopReconcile = context.WithCancel(ctx)
	c.reconciled = make(chan struct{})
	done := c.hatchery.StartReconcile(ctx)
	go func() {
		defer close(c.reconciled)
		err := <-done
		switch {
		case ctx.Err() != nil:
			return // stopping before the hosts answered
		case errors.Is(err, hatchery.ErrHostsUnreachable):
			c.logger.Warn("chicks unavailable until the Docker host answers", "err", err)
		case err != nil:
			c.logger.Error("reconcile chicks", "err", err)
		}
		// Approvals of chicks that ended while Mother was down go.
		err = c.policy.DropChicks(func(id string) bool {
			st := c.hatchery.State(id)
			return st == "" || st.Final()
		})
		if err != nil {
			c.logger.Warn("egress approvals of ended chicks not dropped", "err", err)
		}
		go func() {
			if err := c.nest.ServeChicks(c.lis); err != nil {
				c.nestLog.Error("chick listener stopped", "err", err)
			}
		}()
	}()
}

// waitReconciled waits until the reconcile started by startReconcile has
// ended (the chicks a previous Mother left are resumed, ended or
// announced), or ctx ends.
func (c *chicks) waitReconciled(ctx context.Context) error {
	if c.reconciled == nil {
		return nil
	}
	select {
	case <-c.reconciled:
		return nil
	default:
		c.logger.Warn("input ended; waiting for the Docker hosts first: the chicks a previous Mother left may be in flight")
	}
	select {
	case <-c.reconciled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// policyEnds drops a chick's own approvals and byte ledger when it ends.
type policyEnds struct {
	hatchery.NopObserver
	p      *egress.Policy
	logger *slog.Logger
}

func (o policyEnds) ChickEnded(in hatchery.Info) {
	if err := o.p.ChickEnded(in.ID); err != nil {
		o.logger.Warn("egress approvals of an ended chick not dropped", "chick", in.ID, "err", err)
	}
}

func (c *chicks) close() {
	if c.stopReconcile != nil {
		c.stopReconcile()
		<-c.reconciled
	}
	c.nest.Stop()
	c.lis.Close()
	if err := c.hatchery.Close(); err != nil {
		c.logger.Warn("close hatchery", "err", err)
	}
	if err := c.broker.Close(); err != nil {
		c.logger.Warn("close broker", "err", err)
	}
}

// motherCaller tells the broker whose one of Mother's own calls is, from
// her run's context: its channel, the person whose message it answers
// (qualified by adapter) and the scheduled event it runs.
func motherCaller(ctx context.Context) broker.Caller {
	c := broker.Caller{Kind: broker.CallerMother}
	info, ok := chat.RunInfoFrom(ctx)
	if !ok {
		return c
	}
	if info.Adapter != "" && info.ChannelID != "" {
		c.Channel = info.QualifiedChannel()
	}
	if info.UserID != "" {
		c.User = hatchery.Requester(info.Adapter, info.UserID)
	}
	c.Event = info.Event
	return c
}

// ears hear voice messages through the broker (mother.Ears): a
// transcription is Mother's call, charged to the channel and the person.
type ears struct{ b *broker.Broker }

func (e ears) Transcribe(ctx context.Context, channel, adapter, user string, req model.TranscribeRequest) (string, error) {
	return e.b.Transcribe(ctx, broker.Caller{Kind: broker.CallerMother, Channel: channel, User: hatchery.Requester(adapter, user)}, req)
}

func (e ears) Speak(ctx context.Context, channel, adapter, user, text string) (io.ReadCloser, error) {
	return e.b.Speak(ctx, broker.Caller{Kind: broker.CallerMother, Channel: channel, User: hatchery.Requester(adapter, user)}, text, "opus")
}
