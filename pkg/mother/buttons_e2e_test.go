package mother_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord"
	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/store"
)

// These tests answer a chick's access request with a button, end to end
// through Mother and a real adapter (its real client library against the
// platform's fake on loopback). The test plays the nest: it calls
// RequestAccess as a chick's request_access would.

// buttonsRig is Mother with one real adapter and an egress policy.
type buttonsRig struct {
	m      *mother.Mother
	policy *egress.Policy
	model  *ollamatest.Server
	data   string
	name   string
}

func newButtonsRig(t *testing.T, name string, ac config.Adapter, build func(env chat.Env) (chat.Adapter, error)) *buttonsRig {
	t.Helper()
	r := &buttonsRig{data: t.TempDir(), name: name}
	cfg := &config.Config{Adapters: map[string]config.Adapter{name: ac}}
	cfg.SetDefaults(r.data)
	cfg.Model.ID = "tiny"
	st, err := store.Open(r.data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.model = ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: "the model was asked"} })
	t.Cleanup(r.model.Close)
	p, err := ollama.New(r.model.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.policy, err = egress.NewPolicy(egress.Options{Config: cfg.Chicks, StateDir: filepath.Join(r.data, "state")})
	if err != nil {
		t.Fatal(err)
	}
	r.m, err = mother.New(mother.Options{Config: cfg, Store: st, Provider: p, Egress: r.policy, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := build(chat.Env{Name: name, Config: ac, Files: st.AdapterFiles(name), Logger: slog.New(slog.DiscardHandler)})
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

type grant struct {
	g   egress.Grant
	err error
}

// ask calls RequestAccess for a chick of channel, as the nest would.
func (r *buttonsRig) ask(t *testing.T, id, channel, dest string) (hatchery.Info, <-chan grant) {
	in := hatchery.Info{Record: hatchery.Record{ID: id, Adapter: r.name, ChannelID: channel, Tier: "local", State: hatchery.StateRunning}, Channel: r.name + "/" + channel}
	out := make(chan grant, 1)
	go func() {
		g, err := r.m.RequestAccess(t.Context(), in, dest, "install the requests package")
		out <- grant{g, err}
	}()
	return in, out
}

// pending fails if the request has been answered.
func pending(t *testing.T, res <-chan grant, after string) {
	t.Helper()
	select {
	case g := <-res:
		t.Fatalf("after %s the request was answered: %+v, %v", after, g.g, g.err)
	default:
	}
}

func answered(t *testing.T, res <-chan grant) grant {
	t.Helper()
	select {
	case g := <-res:
		return g
	case <-time.After(15 * time.Second):
		t.Fatal("RequestAccess did not return")
		return grant{}
	}
}

// checkLog: the channel's log holds Mother's request and notices and no
// click.
func (r *buttonsRig) checkLog(t *testing.T, channel string, clickers ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.data, "workspace", "channels", r.name, channel, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m chat.ChannelMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m.Choice || slices.Contains(clickers, m.Sender.ID) {
			t.Errorf("a click was logged as a message: %+v", m)
		}
		texts = append(texts, m.Text)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`", "✅ @mario allowed chick `c-7f3a91c2` to reach `pypi.org:443`"} {
		if !strings.Contains(all, want) {
			t.Errorf("log.jsonl lacks %q:\n%s", want, all)
		}
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times: clicks must not reach it", n)
	}
}

func TestAccessButtonsDiscord(t *testing.T) {
	t.Parallel()
	const general = "700000000000000001"
	mario := discordtest.User{ID: "100000000000000001", Username: "mario"}
	luigi := discordtest.User{ID: "100000000000000002", Username: "luigi"}
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{{ID: general, Type: discordtest.TypeText, Name: "general"}},
		Members:  []discordtest.User{mario, luigi},
	})
	t.Cleanup(fake.Close)
	ac := config.Adapter{Type: "discord", Admins: []string{mario.ID}, Settings: &discord.Settings{BotToken: "test-token", APIURL: fake.URL, GuildID: fake.GuildID()}}
	r := newButtonsRig(t, "discord", ac, func(env chat.Env) (chat.Adapter, error) { return discord.New(env, discord.Options{}) })
	in, res := r.ask(t, "c-7f3a91c2", general, "pypi.org:443")

	var req discordtest.Message
	fake.Wait(t, 15*time.Second, "the request with buttons", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if m.Author.ID == fake.Bot().ID && len(m.Buttons()) == 3 {
				req = *m
				return true
			}
		}
		return false
	})
	if !strings.Contains(req.Content, "asks to reach `pypi.org:443`") || !strings.Contains(req.Content, "`allow c-7f3a91c2`") {
		t.Errorf("request reads %q, want the destination and the typed answers", req.Content)
	}
	bs := req.Buttons()
	if bs[0].CustomID != "choice:allow c-7f3a91c2 pypi.org:443" || bs[0].Style != 1 || bs[2].CustomID != "choice:deny c-7f3a91c2 pypi.org:443" || bs[2].Style != 4 {
		t.Errorf("buttons = %+v", bs)
	}

	// luigi is no admin: told so privately; the request stays open.
	fake.Click(general, req.ID, luigi, bs[0].CustomID)
	fake.Wait(t, 15*time.Second, "the private refusal", func() bool { return len(fake.FollowupsLocked()) == 1 })
	if f := fake.Followups()[0]; !f.Ephemeral || f.UserID != luigi.ID || !strings.Contains(f.Content, "Only an admin can answer") {
		t.Errorf("luigi was told %+v, want an ephemeral refusal", f)
	}
	pending(t, res, "a non-admin's click")
	if ok, _ := r.policy.Allowed(egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}, "pypi.org", 443); ok {
		t.Error("a non-admin's click allowed the destination")
	}
	for _, m := range fake.Messages(general) {
		if m.ID == req.ID && len(m.Buttons()) != 3 {
			t.Errorf("a non-admin's click took the buttons away: %s", m.Components)
		}
	}

	// mario is: the chick gets its destination.
	fake.Click(general, req.ID, mario, bs[0].CustomID)
	g := answered(t, res)
	if g.err != nil || !g.g.Granted || g.g.Scope != egress.ScopeChick || g.g.Message != "approved by @mario for this chick; "+egress.RefusesPrivate {
		t.Fatalf("RequestAccess = %+v, %v", g.g, g.err)
	}
	if ok, _ := r.policy.Allowed(egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}, "pypi.org", 443); !ok {
		t.Error("the approved destination is not allowed")
	}
	fake.Wait(t, 15*time.Second, "the approval and the buttons gone", func() bool {
		notice, ended := false, false
		for _, m := range fake.MessagesLocked(general) {
			// The admin who answered is Mother's own mention in the
			// notice: a Discord mention allowed to ping mario alone. The
			// request's edited text names him without a ping.
			notice = notice || strings.HasPrefix(m.Content, "✅ <@"+mario.ID+"> allowed chick `c-7f3a91c2`") && string(m.AllowedMentions) == `{"parse":[],"users":["`+mario.ID+`"],"replied_user":false}`
			ended = ended || m.ID == req.ID && len(m.Buttons()) == 0 && strings.Contains(m.Content, "\n✅ @mario allowed")
		}
		return notice && ended
	})
	fake.Wait(t, 5*time.Second, "both clicks acknowledged", func() bool { return len(fake.CallbacksLocked()) == 2 })
	r.checkLog(t, general, mario.ID, luigi.ID)
}

func TestAccessButtonsSlack(t *testing.T) {
	t.Parallel()
	const general = "CGENERAL"
	mario := slacktest.User{ID: "UMARIO", Name: "mario"}
	luigi := slacktest.User{ID: "ULUIGI", Name: "luigi"}
	fake := slacktest.New(slacktest.Options{
		Users:    []slacktest.User{mario, luigi},
		Channels: []slacktest.Channel{{ID: general, Name: "general", IsChannel: true, IsMember: true}},
	})
	t.Cleanup(fake.Close)
	ac := config.Adapter{Type: "slack", Admins: []string{mario.ID}, Settings: &slack.Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}}
	r := newButtonsRig(t, "slack", ac, func(env chat.Env) (chat.Adapter, error) { return slack.New(env, slack.Options{}) })
	in, res := r.ask(t, "c-7f3a91c2", general, "pypi.org:443")

	var req slacktest.Message
	fake.Wait(t, 15*time.Second, "the request with buttons", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if m.User == fake.Bot().ID && len(m.Buttons()) == 3 {
				req = *m
				return true
			}
		}
		return false
	})
	bs := req.Buttons()
	if bs[0].Value != "allow c-7f3a91c2 pypi.org:443" || bs[0].Style != "primary" || bs[1].Value != "always c-7f3a91c2 pypi.org:443" || bs[2].Style != "danger" {
		t.Errorf("buttons = %+v", bs)
	}
	if !strings.Contains(req.Text, "`always c-7f3a91c2`") {
		t.Errorf("request reads %q, want the typed answers", req.Text)
	}

	envs := []string{fake.Click(general, req.TS, luigi.ID, bs[1].ActionID)}
	fake.Wait(t, 15*time.Second, "the private refusal", func() bool { return len(fake.EphemeralsLocked()) == 1 })
	if e := fake.Ephemerals()[0]; e.User != luigi.ID || !strings.Contains(e.Text, "Only an admin can answer") {
		t.Errorf("luigi was told %+v", e)
	}
	pending(t, res, "a non-admin's click")

	envs = append(envs, fake.Click(general, req.TS, mario.ID, bs[1].ActionID))
	g := answered(t, res)
	if g.err != nil || !g.g.Granted || g.g.Scope != egress.ScopeChannel || g.g.Message != "approved by @mario for this channel; "+egress.RefusesPrivate {
		t.Fatalf("RequestAccess = %+v, %v", g.g, g.err)
	}
	if ok, _ := r.policy.Allowed(egress.ChickInfo{ID: "c-other", Channel: in.Channel, Tier: in.Tier}, "pypi.org", 443); !ok {
		t.Error("'always' did not allow the channel's other chicks")
	}
	fake.Wait(t, 15*time.Second, "the approval and the buttons gone", func() bool {
		notice, ended := false, false
		for _, m := range fake.MessagesLocked(general) {
			notice = notice || strings.HasPrefix(m.Text, "✅ <@UMARIO> allowed chick `c-7f3a91c2`, and every chick")
			ended = ended || m.TS == req.TS && len(m.Buttons()) == 0 && strings.Contains(m.Text, "\n✅ @mario allowed")
		}
		return notice && ended
	})
	fake.Wait(t, 5*time.Second, "both envelopes acknowledged", func() bool {
		return slices.Contains(fake.AcksLocked(), envs[0]) && slices.Contains(fake.AcksLocked(), envs[1])
	})
	b, _ := os.ReadFile(filepath.Join(r.data, "workspace", "channels", "slack", general, "log.jsonl"))
	if !strings.Contains(string(b), "every chick of this channel") {
		t.Errorf("log lacks the approval:\n%s", b)
	}
}
