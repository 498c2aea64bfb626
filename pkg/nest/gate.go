package nest

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/skills"
	"github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// Gate is Mother's side of the egress gates (docs/isolation.md):
// GateService, served beside ChickService on the same listener.
type Gate struct {
	// Secret derives the gates' tokens and the chicks' gate keys.
	Secret egress.Secret
	// Instance is this Mother's instance id (hatchery.Instance): a gate's
	// token names it.
	Instance string
	// Hosts are the configured Docker hosts' names: only their gates may
	// call.
	Hosts []string
	// Policy decides what a chick may reach and keeps its byte ledger.
	Policy *egress.Policy
	// Metrics counts the connections (nil: none).
	Metrics GateMetrics
}

// GateMetrics counts the gates' connections (pkg/metrics implements it).
type GateMetrics interface {
	// GateConnection counts one connection: destination is "host:port",
	// outcome a hatchery.EgressOutcome.
	GateConnection(destination, outcome, tier string, bytesOut, bytesIn int64)
}

// EgressRecorder is what GateService needs from the hatchery besides
// ChickSessions: each connection goes into the chick's record and to its
// channel (hatchery.EgressObserver).
type EgressRecorder interface {
	RecordEgress(id string, e hatchery.Egress) (hatchery.Info, error)
}

// AccessDesk answers a chick's request_access (Mother: it asks the
// channel's admins). The destination has been validated; the call waits
// until an answer, a timeout, the chick's end or ctx's;
// egress.ErrUnavailable tells the chick to ask again.
type AccessDesk interface {
	RequestAccess(ctx context.Context, chick hatchery.Info, destination, reason string) (egress.Grant, error)
}

// HostToolGate decides, by roles, whether the person a chick was started
// for may have it call a host tool (Mother's MayChickHostTool). A refusal
// is its sentence.
type HostToolGate interface {
	MayChickHostTool(ctx context.Context, in hatchery.Info, tool string) (string, bool)
}

// SetHostToolGate sets the roles check of InvokeHostTool (Mother, once
// she is built; nil: chicks.hostTools alone decides).
func (s *Server) SetHostToolGate(g HostToolGate) {
	s.mu.Lock()
	s.toolGate = g
	s.mu.Unlock()
}

func (s *Server) hostToolGate() HostToolGate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.toolGate
}

// SetAccess sets who answers RequestAccess (Mother, once she is built).
func (s *Server) SetAccess(a AccessDesk) {
	s.mu.Lock()
	s.access = a
	s.mu.Unlock()
}

func (s *Server) accessDesk() AccessDesk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.access
}

var _ pb.GateServiceServer = (*gateService)(nil)

type gateService struct {
	pb.UnimplementedGateServiceServer
	s *Server
}

// gateMethodPrefix starts the full method name of every GateService call.
var gateMethodPrefix = "/" + pb.GateService_ServiceDesc.ServiceName + "/"

type gateCtxKey struct{}

// gateOf returns the authenticated gate's host name of a call.
func gateOf(ctx context.Context) string {
	h, _ := ctx.Value(gateCtxKey{}).(string)
	return h
}

// authenticateGate checks a GateService call: its id is a configured
// Docker host's name, its token that host's gate token.
func (s *Server) authenticateGate(ctx context.Context) (context.Context, error) {
	g := s.gate
	if g == nil || g.Policy == nil {
		return nil, status.Error(codes.Unauthenticated, "this Mother runs no gates")
	}
	host, tok := wire.FromIncoming(ctx)
	if host == "" || tok == "" {
		return nil, status.Error(codes.Unauthenticated, "missing gate host or token")
	}
	if !slices.Contains(g.Hosts, host) {
		s.logger.Warn("gate call refused: unknown Docker host", "host", host)
		return nil, status.Errorf(codes.Unauthenticated, "no Docker host %q in Mother's configuration", host)
	}
	if !egress.Equal(tok, g.Secret.GateToken(g.Instance, host)) {
		s.logger.Warn("gate call refused: bad token", "host", host)
		return nil, status.Error(codes.Unauthenticated, "token not valid for this gate")
	}
	s.noteGate(ctx, host)
	return context.WithValue(ctx, gateCtxKey{}, host), nil
}

// noteGate logs the release and protocol a host's gate says it is (its
// calls' metadata; none: 0.1.x, protocol 1), once, and again when they
// change.
func (s *Server) noteGate(ctx context.Context, host string) {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	rel, proto := first(version.MetaRelease), first(version.MetaProtocol)
	said := rel + "/" + proto
	s.mu.Lock()
	if s.gateReleases == nil {
		s.gateReleases = map[string]string{}
	}
	seen := s.gateReleases[host] == said
	s.gateReleases[host] = said
	s.mu.Unlock()
	if seen {
		return
	}
	p, _ := strconv.Atoi(proto)
	args := []any{"host", host, "release", cmp.Or(rel, "0.1.x"), "protocol", version.ProtocolOf(int32(p))}
	if why := version.Chick(s.release, rel, "the gate on host "+host); why != "" {
		s.logger.Warn("gate of a release this Mother does not work with", append(args, "why", why)...)
		return
	}
	s.logger.Info("gate calls", args...)
}

// gateChick checks that key is chick id's gate key at the calling gate
// (derived from that gate's token, so a key is good at its own host's
// gate only) and that the chick runs on that host. With alive it must not
// have ended. With proxy the key must be an isolated chick's (the proxy's
// key); otherwise the nest-only key of a chick of network "none" will do
// too (the gate reports refused nest.sock connections with it).
func (g *gateService) gateChick(ctx context.Context, id, key string, alive, proxy bool) (hatchery.Info, error) {
	s := g.s
	ok, forProxy := wire.CheckChickKey(s.gate.Secret.GateToken(s.gate.Instance, gateOf(ctx)), id, key)
	if !ok || (proxy && !forProxy) {
		s.logger.Warn("gate named a chick with a bad key", "host", gateOf(ctx), "chick", id)
		return hatchery.Info{}, status.Error(codes.PermissionDenied, "key not valid for this chick")
	}
	in, err := s.chicks.Get(id)
	if err != nil {
		return hatchery.Info{}, status.Error(codes.PermissionDenied, "no such chick")
	}
	if in.Host != "" && in.Host != gateOf(ctx) {
		s.logger.Warn("gate named a chick of another host", "host", gateOf(ctx), "chick", id, "chick_host", in.Host)
		return hatchery.Info{}, status.Error(codes.PermissionDenied, "the chick does not run on this gate's host")
	}
	if alive && in.State.Final() {
		return hatchery.Info{}, status.Error(codes.PermissionDenied, "the chick has ended")
	}
	return in, nil
}

func chickInfo(in hatchery.Info) egress.ChickInfo {
	return egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}
}

// Authorize answers whether a chick may open a connection: its
// allowlist, then its byte cap; with a yes, the operator's addresses for
// the name and the addresses the gate may trust.
func (g *gateService) Authorize(ctx context.Context, req *pb.AuthorizeRequest) (*pb.AuthorizeResponse, error) {
	in, err := g.gateChick(ctx, req.GetChickId(), req.GetKey(), true, true)
	if err != nil {
		return nil, err
	}
	if req.GetHost() == "" || req.GetPort() == 0 || req.GetPort() > 65535 {
		return nil, status.Error(codes.InvalidArgument, "host and a port 1-65535 are required")
	}
	p := g.s.gate.Policy
	ci := chickInfo(in)
	allow, reason := p.Allowed(ci, req.GetHost(), int(req.GetPort()))
	resp := &pb.AuthorizeResponse{Allow: allow, Reason: reason}
	if allow {
		if rem, capped := p.Remaining(in.ID); capped && rem <= 0 {
			resp.Allow, resp.Reason = false, egress.ReasonCapped
		} else if capped {
			resp.BytesRemaining = rem
		}
	}
	if resp.Allow {
		resp.Addresses = p.Addresses(req.GetHost())
		resp.Trusted = p.Trusted(ci, int(req.GetPort()))
	}
	g.s.logger.Debug("gate authorize", "chick", in.ID, "destination", egress.Destination(req.GetHost(), int(req.GetPort())), "allow", resp.Allow, "reason", resp.Reason)
	if !resp.Allow {
		// A refusal is recorded here, where it is decided: the gate
		// reports no connection it was refused (one call a refusal, not
		// two).
		e := hatchery.Egress{Host: clip(strings.ToLower(strings.TrimSuffix(req.GetHost(), ".")), 253), Port: int(req.GetPort()),
			Outcome: hatchery.EgressRefused, Reason: clip(resp.Reason, 300)}
		if resp.Reason == egress.ReasonCapped {
			e.Outcome = hatchery.EgressCapped
		}
		_ = g.record(in, e) // logged; the gate is answered all the same
	}
	return resp, nil
}

var outcomes = map[pb.EgressOutcome]hatchery.EgressOutcome{
	pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED:         hatchery.EgressAllowed,
	pb.EgressOutcome_EGRESS_OUTCOME_REFUSED:         hatchery.EgressRefused,
	pb.EgressOutcome_EGRESS_OUTCOME_BLOCKED_ADDRESS: hatchery.EgressBlockedAddress,
	pb.EgressOutcome_EGRESS_OUTCOME_CAPPED:          hatchery.EgressCapped,
	pb.EgressOutcome_EGRESS_OUTCOME_FAILED:          hatchery.EgressFailed,
}

// Report counts how a connection ended (metrics, the chick's byte
// ledger) and records it with the chick, whose channel sees it. A report
// that comes after its chick ended is counted in the metrics only.
func (g *gateService) Report(ctx context.Context, req *pb.ReportRequest) (*pb.ReportResponse, error) {
	in, err := g.gateChick(ctx, req.GetChickId(), req.GetKey(), false, false)
	if err != nil {
		return nil, err
	}
	outcome, ok := outcomes[req.GetOutcome()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown outcome %v", req.GetOutcome())
	}
	if req.GetHost() == "" || req.GetPort() > 65535 || req.GetBytesOut() < 0 || req.GetBytesIn() < 0 {
		return nil, status.Error(codes.InvalidArgument, "a report needs a host, a port up to 65535 and byte counts that are not negative")
	}
	host := strings.ToLower(strings.TrimSuffix(req.GetHost(), "."))
	e := hatchery.Egress{
		Host: clip(host, 253), Port: int(req.GetPort()), Outcome: outcome, Reason: clip(req.GetReason(), 300),
		Address: clip(req.GetAddress(), 64), BytesOut: req.GetBytesOut(), BytesIn: req.GetBytesIn(),
		Duration: wire.DurationFromProto(req.GetDuration()),
	}
	if e.Reason == "" && outcome == hatchery.EgressRefused {
		e.Reason = egress.ReasonNotAllowed
	}
	if err := g.record(in, e); err != nil {
		return nil, err
	}
	return &pb.ReportResponse{}, nil
}

// record counts a connection of chick in (metrics, its byte ledger) and
// records it with the chick, whose channel sees it; after its end, in
// the metrics only.
func (g *gateService) record(in hatchery.Info, e hatchery.Egress) error {
	outcome := e.Outcome
	if m := g.s.gate.Metrics; m != nil {
		m.GateConnection(egress.Destination(e.Host, e.Port), string(outcome), in.Tier, e.BytesOut, e.BytesIn)
	}
	if in.State.Final() {
		return nil
	}
	g.s.gate.Policy.AddSent(in.ID, e.BytesOut)
	if g.s.egress == nil {
		return nil
	}
	if _, err := g.s.egress.RecordEgress(in.ID, e); err != nil && !errors.Is(err, hatchery.ErrChickEnded) {
		g.s.logger.Warn("gate connection not recorded", "chick", in.ID, "err", err)
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// RequestAccess asks the chick's channel for a destination its allowlist
// does not hold (see AccessDesk). Already allowed: granted at once.
func (c *chickService) RequestAccess(ctx context.Context, req *pb.RequestAccessRequest) (*pb.RequestAccessResponse, error) {
	id := chickOf(ctx)
	desk := c.s.accessDesk()
	if desk == nil {
		return nil, status.Error(codes.Unavailable, "Mother takes no access requests")
	}
	// One host and one port, never a pattern: checked here, on Mother's
	// side, whatever the chick checked (egress.ParseRequest).
	dest, err := egress.ParseRequest(req.GetDestination())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "destination: %v", err)
	}
	in, err := c.s.chicks.Get(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if in.State.Final() {
		return nil, status.Error(codes.FailedPrecondition, "the chick has ended")
	}
	reason := clip(strings.Join(strings.Fields(req.GetReason()), " "), 500)
	g, err := desk.RequestAccess(ctx, in, dest, reason)
	switch {
	case errors.Is(err, egress.ErrUnavailable):
		return nil, status.Error(codes.Unavailable, err.Error())
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	scope := pb.AccessScope_ACCESS_SCOPE_UNSPECIFIED
	switch g.Scope {
	case egress.ScopeChick:
		scope = pb.AccessScope_ACCESS_SCOPE_CHICK
	case egress.ScopeChannel:
		scope = pb.AccessScope_ACCESS_SCOPE_CHANNEL
	}
	return &pb.RequestAccessResponse{Granted: g.Granted, Scope: scope, Message: g.Message}, nil
}

// Contributions takes what a chick gives back to its channel (Mother): a
// skill it created or changed, and channel memory. A refusal is an
// answer (ok false) with the reason; err is for Mother's own failures.
type Contributions interface {
	ProposeSkill(ctx context.Context, chick hatchery.Info, p skills.Proposal) (ok bool, message string, err error)
	UpdateChickMemory(ctx context.Context, chick hatchery.Info, mode, content string) (ok bool, message string, err error)
}

// SetContributions sets who takes ProposeSkill and UpdateMemory (Mother,
// once she is built).
func (s *Server) SetContributions(c Contributions) {
	s.mu.Lock()
	s.contrib = c
	s.mu.Unlock()
}

// contributor returns who takes contributions and the calling chick,
// which must still be running.
func (c *chickService) contributor(ctx context.Context) (Contributions, hatchery.Info, error) {
	c.s.mu.Lock()
	ct := c.s.contrib
	c.s.mu.Unlock()
	if ct == nil {
		return nil, hatchery.Info{}, status.Error(codes.Unavailable, "Mother takes no skills or memory from chicks")
	}
	in, err := c.s.chicks.Get(chickOf(ctx))
	if err != nil {
		return nil, hatchery.Info{}, status.Error(codes.NotFound, err.Error())
	}
	if in.State.Final() {
		return nil, hatchery.Info{}, status.Error(codes.FailedPrecondition, "the chick has ended")
	}
	return ct, in, nil
}

// ProposeSkill hands a skill the chick created or changed to Mother.
func (c *chickService) ProposeSkill(ctx context.Context, req *pb.ProposeSkillRequest) (*pb.ProposeSkillResponse, error) {
	ct, in, err := c.contributor(ctx)
	if err != nil {
		return nil, err
	}
	p := skills.Proposal{Name: req.GetName()}
	for _, e := range req.GetEntries() {
		k := skills.KindOther
		switch e.GetKind() {
		case pb.SkillEntryKind_SKILL_ENTRY_KIND_FILE:
			k = skills.KindFile
		case pb.SkillEntryKind_SKILL_ENTRY_KIND_DIR:
			k = skills.KindDir
		case pb.SkillEntryKind_SKILL_ENTRY_KIND_SYMLINK:
			k = skills.KindSymlink
		}
		p.Entries = append(p.Entries, skills.Entry{Path: e.GetPath(), Kind: k, Size: e.GetSize(), Data: e.GetData(), Executable: e.GetExecutable()})
	}
	ok, msg, err := ct.ProposeSkill(ctx, in, p)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	c.s.logger.Info("chick proposed a skill", "chick", in.ID, "skill", clip(req.GetName(), 80), "accepted", ok)
	return &pb.ProposeSkillResponse{Accepted: ok, Message: msg}, nil
}

// UpdateMemory updates the chick's channel memory through Mother.
func (c *chickService) UpdateMemory(ctx context.Context, req *pb.UpdateMemoryRequest) (*pb.UpdateMemoryResponse, error) {
	var mode string
	switch req.GetMode() {
	case pb.MemoryMode_MEMORY_MODE_APPEND:
		mode = "append"
	case pb.MemoryMode_MEMORY_MODE_REPLACE:
		mode = "replace"
	default:
		return nil, status.Error(codes.InvalidArgument, "mode: append or replace")
	}
	ct, in, err := c.contributor(ctx)
	if err != nil {
		return nil, err
	}
	ok, msg, err := ct.UpdateChickMemory(ctx, in, mode, req.GetContent())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	c.s.logger.Info("chick asked for a memory update", "chick", in.ID, "mode", mode, "updated", ok)
	return &pb.UpdateMemoryResponse{Updated: ok, Message: msg}, nil
}
