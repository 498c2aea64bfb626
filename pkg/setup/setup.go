package setup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mother-chat/mother/pkg/adapters/discord"
	"github.com/mother-chat/mother/pkg/adapters/slack"
	"github.com/mother-chat/mother/pkg/adapters/telegram"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
)

// Platforms setup knows how to check, in the order it offers them.
var Platforms = []string{"discord", "slack", "telegram"}

// Budget defaults proposed for a new configuration.
const (
	DefaultChannelDailyTokens = 20_000_000
	DefaultUserDailyTokens    = 10_000_000
)

// Flags are answers given on the command line. An empty field is not
// given: setup asks (interactive) or keeps what config.json holds.
type Flags struct {
	// Platforms is the chat platforms wanted, comma-separated ("discord,
	// slack"; "none" for none).
	Platforms string

	DiscordToken, DiscordGuild, DiscordAdmins, DiscordAPIURL string
	SlackBotToken, SlackAppToken, SlackAdmins, SlackAPIURL   string
	TelegramToken, TelegramAdmins, TelegramAPIURL            string

	OllamaURL, Model, ChickModel, ChickImage string

	// TierProvider adds a chick tier on another model server: "openai"
	// (any OpenAI-compatible server) or "anthropic"; the other Tier
	// fields describe it.
	TierProvider, TierURL, TierEndpoint, TierKey, TierKeyEnv string
	TierModel, TierName, TierDescription                     string

	// SpeechURL adds a speech server (OpenAI's audio API) that hears
	// voice messages; the other Speech fields describe it.
	SpeechURL, SpeechEndpoint, SpeechKey, SpeechKeyEnv, SpeechModel string

	// DockerHosts are hosts to add, "[name=]address".
	DockerHosts []string
	// DockerTLSDir holds ca.pem, cert.pem and key.pem for tcp:// hosts
	// added; DockerTLSGenerate, "dns-name[,ip...]", generates them
	// instead (into DATA/docker-tls/<host>).
	DockerTLSDir, DockerTLSGenerate string
	// MotherAddress is what chicks on a remote host dial (host:port).
	MotherAddress string

	ChickTokens, ChannelDailyTokens, UserDailyTokens string

	// StatusPage serves the status page (with /metrics and /healthz):
	// "on" (DefaultStatusListen, or the listener configured), "off", a
	// port or a loopback host:port.
	StatusPage string
}

// Options configure a run.
type Options struct {
	// DataDir holds config.json.
	DataDir string
	In      io.Reader
	Out     io.Writer
	// TTY is the terminal In reads from, for tokens typed without echo;
	// nil when In is not a terminal.
	TTY *os.File
	// Interactive asks questions; otherwise setup takes Flags and what
	// config.json holds, asks nothing, and fails on a token that does not
	// verify (Ollama and Docker problems are warnings).
	Interactive bool
	Flags       Flags
	Getenv      func(string) string
	Clock       clock.Clock
	// Self is the command that runs Mother, as the next steps print it
	// ("bin/mother", "mother"; default "mother").
	Self string
}

// ErrNotVerified is a token or value that did not pass its live check in
// non-interactive mode.
var ErrNotVerified = errors.New("not verified")

type run struct {
	ctx     context.Context
	o       Options
	f       Flags
	p       *prompter
	out     io.Writer
	cfg     *object
	path    string
	exists  bool
	changes []string
	// next are the steps printed after writing, besides starting Mother.
	next  []string
	image string
}

// member is a platform user offered as an admin.
type member struct {
	ID, Name string
	Bot      bool
}

// Run performs setup: asks or reads flags, checks, writes config.json.
func Run(ctx context.Context, o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	o.Clock = clock.OrReal(o.Clock)
	r := &run{ctx: ctx, o: o, f: o.Flags, out: o.Out, p: &prompter{in: o.In, out: o.Out, tty: o.TTY},
		path: filepath.Join(o.DataDir, config.File)}
	b, err := os.ReadFile(r.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		r.cfg = newObject()
	case err != nil:
		return fmt.Errorf("read %s: %w", r.path, err)
	default:
		r.exists = true
		if r.cfg, err = parseObject(b); err != nil {
			return fmt.Errorf("%s is not a JSON object (%v): fix it by hand or move it away", r.path, err)
		}
	}
	fmt.Fprintf(r.out, "Mother setup: %s\n", r.path)
	if r.exists {
		r.summary()
	} else {
		fmt.Fprintln(r.out, "No configuration yet: a new one will be written.")
	}
	for _, step := range []func() error{r.platforms, r.model, r.tier, r.speech, r.hosts, r.budgets, r.statusPage} {
		if err := step(); err != nil {
			return err
		}
	}
	return r.write(b)
}

func (r *run) say(format string, args ...any) { fmt.Fprintf(r.out, format+"\n", args...) }

func (r *run) section(title string) { fmt.Fprintf(r.out, "\n== %s ==\n", title) }

// put stores v at path when it differs from what is there, and records
// the change.
func (r *run) put(v any, path ...string) {
	nb, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if old := r.cfg.at(path...); old != nil {
		var a, b bytes.Buffer
		if json.Compact(&a, old) == nil && json.Compact(&b, nb) == nil && bytes.Equal(a.Bytes(), b.Bytes()) {
			return
		}
	}
	r.cfg.setAt(json.RawMessage(nb), path...)
	r.changes = append(r.changes, strings.Join(path, "."))
}

// summary shows what config.json holds, tokens masked.
func (r *run) summary() {
	r.say("Current configuration:")
	ads := r.cfg.child("adapters")
	if len(ads.keys) == 0 {
		r.say("  adapters: none")
	}
	for _, name := range ads.keys {
		a := ads.child(name)
		var toks []string
		for _, k := range []string{"botToken", "appToken"} {
			if s := a.str(k); s != "" {
				toks = append(toks, k+" "+mask(s))
			}
		}
		r.say("  adapter %s: %s, %s, admins %s", name, a.str("type"), orNone(strings.Join(toks, ", ")), orNone(strings.Join(a.strs("admins"), ", ")))
	}
	r.say("  ollama: %s", orDefault(r.cfg.str("providers", "ollama", "url"), config.DefaultOllamaURL))
	r.say("  model: %s/%s", orDefault(r.cfg.str("model", "provider"), config.DefaultModelProvider), orDefault(r.cfg.str("model", "id"), config.DefaultModelID))
	tier := orDefault(r.cfg.str("chicks", "defaultTier"), config.DefaultTier)
	r.say("  chick tier %s: %s", tier, orDefault(r.cfg.str("chicks", "tiers", tier, "model"), config.DefaultChickModel))
	r.say("  chick image: %s", orDefault(r.cfg.str("chicks", "image"), config.DefaultChickImage))
	hosts := r.cfg.list("chicks", "hosts")
	if len(hosts) == 0 {
		r.say("  docker hosts: the local engine (default)")
	}
	for _, raw := range hosts {
		var h config.DockerHost
		_ = json.Unmarshal(raw, &h)
		r.say("  docker host %s: %s", h.Name, orDefault(h.Address, "local engine"))
	}
	for _, b := range budgetFields {
		n, _ := r.cfg.num("budgets", b.field)
		if b.field == "chickTokens" && n == 0 {
			n = config.DefaultChickTokenBudget
		}
		r.say("  budgets.%s: %s", b.field, tokens(n))
	}
	if l := r.cfg.str("metrics", "listen"); l != "" {
		r.say("  status page: %s (metrics.listen)", statusURL(l))
	} else {
		r.say("  status page: off")
	}
}

func orNone(s string) string { return orDefault(s, "none") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ---- chat platforms ----

// adapterOf returns the name of the first adapter of typ ("" if none).
func (r *run) adapterOf(typ string) string {
	ads := r.cfg.child("adapters")
	for _, name := range ads.keys {
		if ads.child(name).str("type") == typ {
			return name
		}
	}
	return ""
}

func (r *run) platforms() error {
	r.section("Chat platforms")
	var have []string
	for _, t := range Platforms {
		if r.adapterOf(t) != "" {
			have = append(have, t)
		}
	}
	answer := r.f.Platforms
	if answer == "" && !r.o.Interactive {
		answer = strings.Join(have, ",")
		given := map[string]bool{"discord": r.f.DiscordToken != "", "slack": r.f.SlackBotToken != "", "telegram": r.f.TelegramToken != ""}
		for _, t := range Platforms {
			if given[t] && !slices.Contains(have, t) {
				answer += "," + t
			}
		}
	}
	var want []string
	for {
		if answer == "" && r.o.Interactive {
			var err error
			answer, err = r.p.ask("Chat platforms ("+strings.Join(Platforms, ", ")+"; comma-separated, 'none' for none)", orDefault(strings.Join(have, ","), "discord"))
			if err != nil {
				return err
			}
		}
		var bad string
		want, bad = parseList(answer)
		if bad == "" {
			break
		}
		r.say("  ✗ %s", bad)
		if !r.o.Interactive {
			return fmt.Errorf("platforms: %s: %w", bad, ErrNotVerified)
		}
		answer = ""
	}
	for _, t := range have {
		if slices.Contains(want, t) {
			continue
		}
		name := r.adapterOf(t)
		remove := !r.o.Interactive && r.f.Platforms != ""
		if r.o.Interactive {
			var err error
			if remove, err = r.p.yes(fmt.Sprintf("Remove the %s adapter %q?", t, name), false); err != nil {
				return err
			}
		}
		if remove {
			r.cfg.removeAt("adapters", name)
			r.changes = append(r.changes, "adapters."+name+" (removed)")
		}
	}
	for _, t := range want {
		name := r.adapterOf(t)
		if name == "" {
			name = t
			r.put(t, "adapters", name, "type")
		}
		var err error
		switch t {
		case "discord":
			err = r.discord(name)
		case "slack":
			err = r.slack(name)
		case "telegram":
			err = r.telegram(name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseList(s string) (want []string, bad string) {
	for _, t := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ',' || r == ' ' }) {
		if t == "none" {
			continue
		}
		if !slices.Contains(Platforms, t) {
			return nil, fmt.Sprintf("unknown platform %q (choose from %s)", t, strings.Join(Platforms, ", "))
		}
		if !slices.Contains(want, t) {
			want = append(want, t)
		}
	}
	return want, ""
}

// token gets a token and checks it with verify until it passes
// (interactive) or fails (otherwise). flag is the command line's value.
func (r *run) token(label, flag, current string, verify func(string) error) (string, error) {
	tok := flag
	if tok == "" && !r.o.Interactive {
		tok = current
	}
	for attempt := 0; ; attempt++ {
		if tok == "" || attempt > 0 {
			if !r.o.Interactive {
				if tok == "" {
					return "", fmt.Errorf("%s: missing (give it as a flag): %w", label, ErrNotVerified)
				}
			} else {
				var err error
				if tok, err = r.p.secret(label, current); err != nil {
					return "", err
				}
				if tok == "" {
					r.say("  a token is required")
					continue
				}
			}
		}
		err := verify(tok)
		if err == nil {
			return tok, nil
		}
		r.say("  ✗ %v", err)
		if !r.o.Interactive {
			return "", fmt.Errorf("%s: %v: %w", label, err, ErrNotVerified)
		}
		if tok == current {
			current = ""
		}
	}
}

func (r *run) apiURL(name, flag string) string {
	if flag != "" {
		r.put(flag, "adapters", name, "apiURL")
		return flag
	}
	return r.cfg.str("adapters", name, "apiURL")
}

func (r *run) discord(name string) error {
	r.say("\nDiscord (adapter %q): the bot's token is under Developer Portal, your app, Bot, Reset Token.", name)
	api := r.apiURL(name, r.f.DiscordAPIURL)
	var id discord.Identity
	tok, err := r.token("Discord bot token", r.f.DiscordToken, r.cfg.str("adapters", name, "botToken"), func(t string) error {
		var err error
		id, err = discord.Probe(r.ctx, discord.Settings{BotToken: config.Secret(t), APIURL: api})
		return err
	})
	if err != nil {
		return err
	}
	r.put(tok, "adapters", name, "botToken")
	var gs []string
	for _, g := range id.Guilds {
		gs = append(gs, fmt.Sprintf("%s (%s)", g.Name, g.ID))
	}
	r.say("  ✓ bot %s (%s), in %d guild(s): %s", id.BotName, id.BotID, len(id.Guilds), orNone(strings.Join(gs, ", ")))
	if len(id.Guilds) == 0 {
		r.say("  ! the bot is in no guild yet: invite it with OAuth2, URL Generator, scope bot")
	}
	s := discord.Settings{BotToken: config.Secret(tok), APIURL: api}
	guild := r.cfg.str("adapters", name, "guildId")
	switch {
	case r.f.DiscordGuild != "":
		guild = r.f.DiscordGuild
	case r.o.Interactive && len(id.Guilds) > 1:
		for i, g := range id.Guilds {
			r.say("   %d) %s (%s)", i+1, g.Name, g.ID)
		}
		a, err := r.p.ask("Limit Mother to one guild (number or id; 'all' for every guild)", orDefault(guild, "all"))
		if err != nil {
			return err
		}
		guild = a
		if n, err := strconv.Atoi(a); err == nil && n >= 1 && n <= len(id.Guilds) {
			guild = id.Guilds[n-1].ID
		}
		if guild == "all" {
			guild = ""
		}
	}
	if guild != "" {
		r.put(guild, "adapters", name, "guildId")
	} else if r.cfg.at("adapters", name, "guildId") != nil {
		r.cfg.removeAt("adapters", name, "guildId")
		r.changes = append(r.changes, "adapters."+name+".guildId (removed)")
	}
	var members []member
	var listErr error
	for _, g := range id.Guilds {
		if guild != "" && g.ID != guild {
			continue
		}
		ms, err := discord.Members(r.ctx, s, g.ID)
		if err != nil {
			listErr = err
			continue
		}
		for _, m := range ms {
			if !slices.ContainsFunc(members, func(x member) bool { return x.ID == m.ID }) && m.ID != id.BotID {
				members = append(members, member{ID: m.ID, Name: m.Name, Bot: m.Bot})
			}
		}
	}
	if err := r.admins(name, "Discord", members, listErr, r.f.DiscordAdmins, isDigits); err != nil {
		return err
	}
	return r.defaultRole(name, "Discord", "a Discord role as role:<id>")
}

func (r *run) slack(name string) error {
	r.say("\nSlack (adapter %q): tokens are under api.slack.com/apps, your app: OAuth & Permissions (xoxb-) and Basic Information, App-Level Tokens (xapp-, connections:write).", name)
	api := r.apiURL(name, r.f.SlackAPIURL)
	var id slack.Identity
	bot, err := r.token("Slack bot token (xoxb-...)", r.f.SlackBotToken, r.cfg.str("adapters", name, "botToken"), func(t string) error {
		if !strings.HasPrefix(t, "xoxb-") {
			return errors.New("a Slack bot token starts with xoxb-")
		}
		var err error
		id, err = slack.Probe(r.ctx, slack.Settings{BotToken: config.Secret(t), APIURL: api})
		return err
	})
	if err != nil {
		return err
	}
	r.put(bot, "adapters", name, "botToken")
	r.say("  ✓ bot %s (%s) in workspace %s (%s)", id.BotName, id.BotID, id.Team, id.TeamID)
	app, err := r.token("Slack app-level token (xapp-...)", r.f.SlackAppToken, r.cfg.str("adapters", name, "appToken"), func(t string) error {
		if !strings.HasPrefix(t, "xapp-") {
			return errors.New("a Slack app-level token starts with xapp-")
		}
		return slack.ProbeSocket(r.ctx, slack.Settings{BotToken: config.Secret(bot), AppToken: config.Secret(t), APIURL: api})
	})
	if err != nil {
		return err
	}
	r.put(app, "adapters", name, "appToken")
	r.say("  ✓ Socket Mode connection opened")
	var members []member
	ms, listErr := slack.Members(r.ctx, slack.Settings{BotToken: config.Secret(bot), APIURL: api})
	for _, m := range ms {
		if m.ID != id.BotID {
			members = append(members, member{ID: m.ID, Name: m.Name, Bot: m.Bot})
		}
	}
	err = r.admins(name, "Slack", members, listErr, r.f.SlackAdmins, func(s string) bool {
		return len(s) > 1 && (s[0] == 'U' || s[0] == 'W') && strings.ToUpper(s) == s
	})
	if err != nil {
		return err
	}
	return r.defaultRole(name, "Slack", "a Slack user group as group:<id>")
}

func (r *run) telegram(name string) error {
	r.say("\nTelegram (adapter %q): the token comes from @BotFather (/newbot or /token).", name)
	api := r.apiURL(name, r.f.TelegramAPIURL)
	var id telegram.Identity
	tok, err := r.token("Telegram bot token", r.f.TelegramToken, r.cfg.str("adapters", name, "botToken"), func(t string) error {
		var err error
		id, err = telegram.Probe(r.ctx, telegram.Settings{BotToken: config.Secret(t), APIURL: api})
		return err
	})
	if err != nil {
		return err
	}
	r.put(tok, "adapters", name, "botToken")
	r.say("  ✓ bot @%s (%d)", id.Username, id.ID)
	if r.o.Interactive && r.f.TelegramAdmins == "" {
		r.say("  A bot cannot list Telegram's users: from each admin's account, send @%s a message now.", id.Username)
		if _, err := r.p.ask("Press enter once they have", ""); err != nil {
			return err
		}
	}
	var members []member
	ms, listErr := telegram.RecentUsers(r.ctx, telegram.Settings{BotToken: config.Secret(tok), APIURL: api})
	for _, m := range ms {
		members = append(members, member{ID: m.ID, Name: m.Name})
	}
	if err := r.admins(name, "Telegram", members, listErr, r.f.TelegramAdmins, isDigits); err != nil {
		return err
	}
	return r.defaultRole(name, "Telegram", "a group's administrators as chatAdmins")
}

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// admins picks the adapter's admins from members: by number, name or id.
func (r *run) admins(name, platform string, members []member, listErr error, flag string, validID func(string) bool) error {
	current := r.cfg.strs("adapters", name, "admins")
	if listErr != nil {
		r.say("  ! could not list %s's users: %v", platform, listErr)
	}
	if r.o.Interactive && len(members) > 0 {
		r.say("  %s users:", platform)
		for i, m := range members {
			tag := ""
			if m.Bot {
				tag += " [bot]"
			}
			if slices.Contains(current, m.ID) {
				tag += " [admin]"
			}
			r.say("   %d) %s (%s)%s", i+1, m.Name, m.ID, tag)
		}
	}
	answer := flag
	for {
		if answer == "" {
			if !r.o.Interactive {
				return nil // keep what is there
			}
			var err error
			answer, err = r.p.ask("Admins (numbers, names or ids, comma-separated; 'none' for none)", strings.Join(current, ","))
			if err != nil {
				return err
			}
			if answer == "" {
				r.say("  ! no admins: nobody can approve chicks' requests or DM Mother unless dm allows it")
				return nil
			}
		}
		ids, bad := resolveAdmins(answer, members, validID)
		if bad == "" {
			if ids == nil {
				ids = []string{}
			}
			r.put(ids, "adapters", name, "admins")
			var names []string
			for _, id := range ids {
				names = append(names, nameOf(id, members))
			}
			r.say("  ✓ admins: %s", orNone(strings.Join(names, ", ")))
			return nil
		}
		r.say("  ✗ %s", bad)
		if !r.o.Interactive {
			return fmt.Errorf("%s admins: %s: %w", platform, bad, ErrNotVerified)
		}
		answer = ""
	}
}

func nameOf(id string, members []member) string {
	for _, m := range members {
		if m.ID == id {
			return m.Name + " (" + id + ")"
		}
	}
	return id
}

func resolveAdmins(answer string, members []member, validID func(string) bool) ([]string, string) {
	var ids []string
	for _, a := range strings.FieldsFunc(answer, func(r rune) bool { return r == ',' || r == ' ' }) {
		if strings.EqualFold(a, "none") {
			continue
		}
		id := ""
		if n, err := strconv.Atoi(a); err == nil && n >= 1 && n <= len(members) && len(a) < 4 {
			id = members[n-1].ID
		}
		for _, m := range members {
			if id == "" && (m.ID == a || strings.EqualFold(m.Name, a) || strings.Contains(strings.ToLower(m.Name), "("+strings.ToLower(strings.TrimPrefix(a, "@"))+")") || strings.Contains(strings.ToLower(m.Name), "(@"+strings.ToLower(strings.TrimPrefix(a, "@"))+")")) {
				id = m.ID
			}
		}
		if id == "" {
			if !validID(a) {
				return nil, fmt.Sprintf("%q is neither a listed user nor a user id", a)
			}
			id = a
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, ""
}
