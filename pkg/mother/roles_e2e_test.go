package mother_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord"
	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/store"
)

// These tests check each permission of the roles table end to end: a
// person posts in the fake Discord, the real discordgo client delivers
// it, Mother's scripted model calls the tool regardless of what the
// prompt told it ("try anyway"), and the tool runs or is refused with
// the sentence, posted to the channel. Roles come from the fake's guild
// members (GET /guilds/{id}/members/{user}).

// recHatchery records spawns: the chick runtime is not what is tested.
type recHatchery struct {
	mu     sync.Mutex
	spawns []hatchery.SpawnRequest
}

func (h *recHatchery) Spawn(_ context.Context, req hatchery.SpawnRequest) (hatchery.Info, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spawns = append(h.spawns, req)
	return hatchery.Info{Record: hatchery.Record{ID: "c-0000000" + string(rune('1'+len(h.spawns))), Adapter: req.Adapter, ChannelID: req.ChannelID, Tier: req.Tier, State: hatchery.StateRunning}}, nil
}
func (h *recHatchery) Stop(string, hatchery.Reason, string, time.Duration) (hatchery.State, error) {
	return hatchery.StateRunning, nil
}
func (h *recHatchery) List(bool) []hatchery.Info { return nil }
func (h *recHatchery) Get(string) (hatchery.Info, error) {
	return hatchery.Info{}, errors.New("no such chick")
}
func (h *recHatchery) Config() config.Chicks                { return config.Chicks{} }
func (h *recHatchery) Reported(string)                      {}
func (h *recHatchery) Spawned(string) (hatchery.Info, bool) { return hatchery.Info{}, false }
func (h *recHatchery) tiers() (out []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.spawns {
		out = append(out, s.Tier)
	}
	return out
}

const (
	rolesGeneral = "700000000000000001"
	rolesStaff   = "700000000000000002"
	opsRole      = "500000000000000001"
)

var (
	rolesMario    = discordtest.User{ID: "100000000000000001", Username: "mario", GlobalName: "Mario"}
	rolesPeach    = discordtest.User{ID: "100000000000000002", Username: "peach"}
	rolesLuigi    = discordtest.User{ID: "100000000000000003", Username: "luigi"}
	rolesToad     = discordtest.User{ID: "100000000000000004", Username: "toad"}
	rolesImpostor = discordtest.User{ID: "100000000000000005", Username: "mario", GlobalName: "Mario"}
)

type rolesRig struct {
	fake   *discordtest.Server
	m      *mother.Mother
	hatch  *recHatchery
	model  *ollamatest.Server
	policy *egress.Policy
	data   string
	st     *store.Store
}

// rolesConfig: the server's default role is guest; peach has ops through
// a Discord guild role; luigi has kids by id; mario is the adapter's
// admin. In the staff channel only roles with talk are answered: its
// default is "muted", which may nothing.
func rolesConfig(fake *discordtest.Server) config.Adapter {
	return config.Adapter{Type: "discord", Admins: []string{rolesMario.ID}, Settings: &discord.Settings{BotToken: "test-token", APIURL: fake.URL, GuildID: fake.GuildID()}}
}

func newRolesRig(t *testing.T, edit ...func(*config.Config)) *rolesRig {
	t.Helper()
	r := &rolesRig{data: t.TempDir(), hatch: &recHatchery{}}
	r.fake = discordtest.New(discordtest.Options{
		Channels:    []discordtest.Channel{{ID: rolesGeneral, Type: discordtest.TypeText, Name: "general"}, {ID: rolesStaff, Type: discordtest.TypeText, Name: "staff"}},
		Members:     []discordtest.User{rolesMario, rolesPeach, rolesLuigi, rolesToad, rolesImpostor},
		MemberRoles: map[string][]string{rolesPeach.ID: {opsRole}},
	})
	t.Cleanup(r.fake.Close)
	ac := rolesConfig(r.fake)
	cfg := &config.Config{Adapters: map[string]config.Adapter{"discord": ac}}
	cfg.Chicks.Tiers = map[string]config.Tier{"local": {Provider: "ollama", Model: "tiny"}, "hard": {Provider: "ollama", Model: "big"}}
	cfg.Chicks.DefaultTier = "local"
	cfg.Roles = config.Roles{
		Define: map[string]config.RoleDef{
			"ops":   {May: []string{"talk", "chicks:hard", "events", "events.periodic", "files.write", "access.approve", "tool:notes.*"}},
			"kids":  {May: []string{"talk", "events"}},
			"muted": {May: []string{}},
		},
		Adapters: map[string]config.AdapterRoles{"discord": {
			Default:  "guest",
			Members:  map[string][]string{"ops": {"role:" + opsRole}, "kids": {rolesLuigi.ID}},
			Channels: map[string]config.ChannelRoles{rolesStaff: {Default: "muted"}},
		}},
	}
	cfg.SetDefaults(r.data)
	cfg.Model.ID = "tiny"
	for _, e := range edit {
		e(cfg)
	}
	if err := cfg.Validate(); err != nil {
		for _, fe := range err.(config.Errors) {
			if strings.HasPrefix(fe.Field, "roles") {
				t.Fatalf("roles config: %v", fe)
			}
		}
	}
	st, err := store.Open(r.data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	r.model = ollamatest.NewFunc(rolesScript)
	t.Cleanup(r.model.Close)
	p, err := ollama.New(r.model.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.policy, err = egress.NewPolicy(egress.Options{Config: cfg.Chicks, StateDir: filepath.Join(r.data, "state")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := events.New(events.Options{Dir: st.EventsDir(), StateDir: filepath.Join(r.data, "state", "events"), Resolve: events.AdapterResolver([]string{"discord"})})
	if err != nil {
		t.Fatal(err)
	}
	tools := append([]agent.Tool{hosttools.New(hosttools.Options{}).InvokeTool()}, events.Tools(w)...)
	r.m, err = mother.New(mother.Options{Config: cfg, Store: st, Provider: p, Egress: r.policy, Chicks: r.hatch, Tools: tools, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := discord.New(chat.Env{Name: "discord", Config: ac, Files: st.AdapterFiles("discord"), Logger: slog.New(slog.DiscardHandler)}, discord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.m.AddAdapter(a); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.m.Shutdown(ctx)
		st.Close()
	})
	return r
}

// rolesScript is a model that does what the message says, whatever its
// prompt told it: "call TOOL {json}" calls TOOL, twice (a refused call is
// tried again), then it answers with the last tool result.
func rolesScript(req ollamatest.Request) ollamatest.Turn {
	var results []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	last := req.Messages[len(req.Messages)-1]
	_, cmd, ok := strings.Cut(req.LastUser(), "call ")
	if !ok {
		return ollamatest.Turn{Text: "hello"}
	}
	name, raw, _ := strings.Cut(cmd, " ")
	if last.Role == "tool" && (len(results) >= 2 || !strings.HasPrefix(last.Content, "Refused:")) {
		return ollamatest.Turn{Text: "tool said: " + last.Content}
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(raw), &args)
	return ollamatest.Turn{Calls: []ollamatest.Call{{Name: name, Args: args}}}
}

// ask posts text from u in channel and waits for Mother's final answer
// ("tool said: ...", or "hello"); it returns every bot message after u's.
func (r *rolesRig) ask(t *testing.T, channel string, u discordtest.User, text string) []string {
	t.Helper()
	said := r.fake.Say(channel, u, "<@"+r.fake.Bot().ID+"> "+text)
	var out []string
	r.fake.Wait(t, 20*time.Second, "Mother's answer to "+text, func() bool {
		out = out[:0]
		seen, done := false, false
		wantFinal := strings.HasPrefix(text, "call ")
		for _, m := range r.fake.MessagesLocked(channel) {
			if m.ID == said.ID {
				seen = true
				continue
			}
			if seen && m.Author.ID == r.fake.Bot().ID && !m.Deleted {
				out = append(out, m.Content)
				done = done || strings.Contains(m.Content, "tool said:") || strings.Contains(m.Content, "hello") || !wantFinal && strings.HasPrefix(m.Content, "Only ")
			}
		}
		return done && (len(out) > 0)
	})
	// Let the run finish (its edits) before the next message.
	time.Sleep(50 * time.Millisecond)
	return out
}

func joined(xs []string) string { return strings.Join(xs, "\n") }

// refused checks the sentence reached the channel once, and the model
// saw it as the tool's refusal.
func refused(t *testing.T, got []string, sentence string) {
	t.Helper()
	n := 0
	for _, g := range got {
		if g == sentence {
			n++
		}
	}
	if n != 1 {
		t.Errorf("channel got %q, want the refusal %q posted once", got, sentence)
	}
	if !strings.Contains(joined(got), "tool said: Refused: "+sentence) {
		t.Errorf("channel got %q, want the model to have been told %q", got, sentence)
	}
}

func notRefused(t *testing.T, got []string) {
	t.Helper()
	if strings.Contains(joined(got), "Refused:") || strings.Contains(joined(got), "Only ") {
		t.Errorf("channel got %q, want no refusal", got)
	}
}

func TestRolesDiscordChicksAndTiers(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	// peach has ops through her guild role: the hard tier.
	notRefused(t, r.ask(t, rolesGeneral, rolesPeach, `call spawn_chick {"goal":"build it","tier":"hard"}`))
	if got := r.hatch.tiers(); len(got) != 1 || got[0] != "hard" {
		t.Fatalf("spawned tiers %v, want [hard]", got)
	}
	// ops has no local tier; the default (guest) no chicks at all.
	refused(t, r.ask(t, rolesGeneral, rolesPeach, `call spawn_chick {"goal":"build it"}`), "Only members can start chicks on the local tier.")
	refused(t, r.ask(t, rolesGeneral, rolesToad, `call spawn_chick {"goal":"build it","tier":"hard"}`), "Only members or members of ops can start chicks on the hard tier.")
	// A display name equal to the admin's gives nothing.
	refused(t, r.ask(t, rolesGeneral, rolesImpostor, `call spawn_chick {"goal":"build it","tier":"hard"}`), "Only members or members of ops can start chicks on the hard tier.")
	// mario is the admin (by id): every tier.
	notRefused(t, r.ask(t, rolesGeneral, rolesMario, `call spawn_chick {"goal":"build it","tier":"local"}`))
	if got := r.hatch.tiers(); len(got) != 2 || got[1] != "local" {
		t.Fatalf("spawned tiers %v, want [hard local]", got)
	}
	// The prompt told toad's run what it may not do.
	var sys string
	for _, q := range r.model.Requests() {
		if strings.Contains(q.LastUser(), "toad") || strings.Contains(q.System(), "Roles of the person asking: guest.") {
			sys = q.System()
		}
	}
	if !strings.Contains(sys, "Roles of the person asking: guest.") || !strings.Contains(sys, "They may not: start chicks") {
		t.Errorf("toad's system prompt does not say what toad may not do:\n%s", sys)
	}
}

func TestRolesDiscordEvents(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	eventFile := func(name string) bool {
		_, err := os.Stat(filepath.Join(r.st.EventsDir(), name+".json"))
		return err == nil
	}
	// "by" in the arguments is the model's word: ignored.
	oneShot := `call schedule_event {"name":"%s","type":"one-shot","text":"remind","at":"2099-01-01T09:00:00+00:00","by":"` + rolesMario.ID + `"}`
	periodic := `call schedule_event {"name":"%s","type":"periodic","text":"remind","schedule":"0 9 * * 1","timezone":"UTC"}`
	f := func(format, name string) string { return strings.Replace(format, "%s", name, 1) }

	refused(t, r.ask(t, rolesGeneral, rolesToad, f(oneShot, "toad-once")), "Only members or members of kids, ops can schedule events.")
	notRefused(t, r.ask(t, rolesGeneral, rolesLuigi, f(oneShot, "luigi-once")))
	refused(t, r.ask(t, rolesGeneral, rolesLuigi, f(periodic, "luigi-weekly")), "Only members or members of ops can schedule periodic events.")
	notRefused(t, r.ask(t, rolesGeneral, rolesPeach, f(periodic, "peach-weekly")))
	if eventFile("toad-once") || eventFile("luigi-weekly") {
		t.Error("a refused event was written")
	}
	if !eventFile("luigi-once") || !eventFile("peach-weekly") {
		t.Fatal("an allowed event was not written")
	}
	// Its runs act for whoever scheduled it, by id.
	for name, by := range map[string]string{"luigi-once": rolesLuigi.ID, "peach-weekly": rolesPeach.ID} {
		b, _ := os.ReadFile(filepath.Join(r.st.EventsDir(), name+".json"))
		var ev events.Event
		if err := json.Unmarshal(b, &ev); err != nil || ev.By != by {
			t.Errorf("%s.json: by %q (%v), want %q:\n%s", name, ev.By, err, by, b)
		}
	}
}

func TestRolesDiscordFilesAndHostTools(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	skill := "channels/discord/" + rolesGeneral + "/skills/tea/SKILL.md"
	path := filepath.Join(r.data, "workspace", skill)
	refused(t, r.ask(t, rolesGeneral, rolesLuigi, `call write {"path":"`+skill+`","content":"kids were here"}`), "Only members or members of ops can change my own files.")
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused write wrote the file")
	}
	notRefused(t, r.ask(t, rolesGeneral, rolesPeach, `call write {"path":"`+skill+`","content":"brew"}`))
	if b, err := os.ReadFile(path); err != nil || string(b) != "brew" {
		t.Fatalf("allowed write: %q, %v", b, err)
	}
	// Host tools: ops may notes.*, not mail.*; the tool's server is not
	// running, so an allowed call ends in the tool's own error.
	got := r.ask(t, rolesGeneral, rolesPeach, `call invoke_tool {"tool":"notes.add","args":{}}`)
	notRefused(t, got)
	if !strings.Contains(joined(got), "notes.add") {
		t.Errorf("allowed host tool call: %q", got)
	}
	refused(t, r.ask(t, rolesGeneral, rolesPeach, `call invoke_tool {"tool":"mail.send","args":{}}`), "Only members can use the host tool mail.send.")
	refused(t, r.ask(t, rolesGeneral, rolesToad, `call invoke_tool {"tool":"notes.add","args":{}}`), "Only members or members of ops can use the host tool notes.add.")
}

func TestRolesDiscordTalk(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	// In staff the default role may not talk: toad is told so, the model
	// never hears of it; peach (ops) is answered.
	got := r.ask(t, rolesStaff, rolesToad, "hi")
	if joined(got) != "Only members, guests or members of kids, ops can talk to me here." {
		t.Errorf("toad in staff got %q", got)
	}
	for _, q := range r.model.Requests() {
		if strings.Contains(q.LastUser(), "hi") {
			t.Errorf("the model was asked about a message of someone who may not talk here: %q", q.LastUser())
		}
	}
	if got := r.ask(t, rolesStaff, rolesPeach, "hi"); joined(got) != "hello" {
		t.Errorf("peach in staff got %q", got)
	}
	refusals := r.m.RecentRefusals()
	if len(refusals) == 0 || refusals[0].Perm != "talk" || refusals[0].User != rolesToad.ID {
		t.Errorf("RecentRefusals = %+v, want toad's talk", refusals)
	}
}

func TestRolesDiscordAccessApproval(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	in := hatchery.Info{Record: hatchery.Record{ID: "c-7f3a91c2", Adapter: "discord", ChannelID: rolesGeneral, Tier: "local", State: hatchery.StateRunning}, Channel: "discord/" + rolesGeneral}
	res := make(chan egress.Grant, 1)
	go func() {
		g, _ := r.m.RequestAccess(t.Context(), in, "pypi.org:443", "install requests")
		res <- g
	}()
	var req discordtest.Message
	r.fake.Wait(t, 15*time.Second, "the request with buttons", func() bool {
		for _, m := range r.fake.MessagesLocked(rolesGeneral) {
			if m.Author.ID == r.fake.Bot().ID && len(m.Buttons()) == 3 {
				req = *m
				return true
			}
		}
		return false
	})
	allow := req.Buttons()[0].CustomID
	// The impostor bears the admin's name; toad and luigi have no ops.
	for i, u := range []discordtest.User{rolesImpostor, rolesToad} {
		r.fake.Click(rolesGeneral, req.ID, u, allow)
		r.fake.Wait(t, 15*time.Second, "the private refusal", func() bool { return len(r.fake.FollowupsLocked()) == i+1 })
		if f := r.fake.Followups()[i]; f.UserID != u.ID || !strings.Contains(f.Content, "Only members of ops can answer access requests; yours was ignored.") {
			t.Errorf("%s was told %+v", u.Username, f)
		}
	}
	select {
	case g := <-res:
		t.Fatalf("answered by someone without access.approve: %+v", g)
	case <-time.After(200 * time.Millisecond):
	}
	// peach has ops through her guild role.
	r.fake.Click(rolesGeneral, req.ID, rolesPeach, allow)
	select {
	case g := <-res:
		if !g.Granted {
			t.Fatalf("peach's approval: %+v", g)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("peach's approval was not taken")
	}
}

// TestRolesDiscordChickHostTools: a chick's host tool request is checked
// against the roles of the person it was started for (the nest asks
// MayChickHostTool); peach's ops comes from her guild role.
func TestRolesDiscordChickHostTools(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	chick := func(by string) hatchery.Info {
		return hatchery.Info{Record: hatchery.Record{ID: "c-1", Adapter: "discord", ChannelID: rolesGeneral, StartedBy: by}}
	}
	if s, ok := r.m.MayChickHostTool(t.Context(), chick(rolesPeach.ID), "notes.add"); !ok {
		t.Errorf("peach's chick refused notes.add: %q", s)
	}
	for _, c := range []struct{ by, tool, want string }{
		{rolesPeach.ID, "mail.send", "Only members can use the host tool mail.send."},
		{rolesToad.ID, "notes.add", "Only members or members of ops can use the host tool notes.add."},
		{rolesImpostor.ID, "notes.add", "Only members or members of ops can use the host tool notes.add."},
		{"", "notes.add", "Only members or members of ops can use the host tool notes.add."},
	} {
		if s, ok := r.m.MayChickHostTool(t.Context(), chick(c.by), c.tool); ok || s != c.want {
			t.Errorf("chick of %q calling %s: %q, %v; want %q", c.by, c.tool, s, ok, c.want)
		}
	}
}

// TestRolesDiscordEventRunActsForItsScheduler: an event's run has the
// roles of the person who scheduled it (by id, from the event), and the
// channel's default role when nobody did.
func TestRolesDiscordEventRunActsForItsScheduler(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t)
	fire := func(file, by string) string {
		t.Helper()
		done := make(chan events.Result, 1)
		err := r.m.Submit(t.Context(), events.Firing{File: file, Type: events.Immediate, Adapter: "discord", ChannelID: rolesGeneral,
			Text: `call spawn_chick {"goal":"nightly build","tier":"hard"}`, By: by}, func(res events.Result) { done <- res })
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("event %s did not finish", file)
		}
		var out []string
		for _, m := range r.fake.Messages(rolesGeneral) {
			if m.Author.ID == r.fake.Bot().ID {
				out = append(out, m.Content)
			}
		}
		return joined(out)
	}
	fire("peach.json", rolesPeach.ID)
	if got := r.hatch.tiers(); len(got) != 1 || got[0] != "hard" {
		t.Fatalf("an event peach scheduled spawned %v, want [hard]", got)
	}
	got := fire("nobody.json", "")
	if len(r.hatch.tiers()) != 1 || !strings.Contains(got, "Only members or members of ops can start chicks on the hard tier.") {
		t.Errorf("an event nobody scheduled (default role guest): spawned %v; channel:\n%s", r.hatch.tiers(), got)
	}
}

// TestRolesDiscordSlowLookupFailsClosed: a platform that does not answer
// in roles.lookupTimeout leaves the person with what their id and the
// default role give (fail closed), and does not hold the message up
// longer than that: Discord answers peach's member lookup with a 30 s
// rate limit, and her ops role is not waited for.
func TestRolesDiscordSlowLookupFailsClosed(t *testing.T) {
	t.Parallel()
	r := newRolesRig(t, func(c *config.Config) { c.Roles.LookupTimeout = config.Dur(300 * time.Millisecond) })
	r.fake.RateLimit("GET", "/guilds/"+r.fake.GuildID()+"/members/"+rolesPeach.ID, 30, 1)
	refused(t, r.ask(t, rolesGeneral, rolesPeach, `call spawn_chick {"goal":"g","tier":"hard"}`), "Only members or members of ops can start chicks on the hard tier.")
	if n := len(r.hatch.tiers()); n != 0 {
		t.Fatalf("%d chicks spawned while the platform was slow", n)
	}
}
